"""Consolidation through the real server: the RPC, search returning one semantic memory for the cluster,
idempotence, the audit trail and the undo (deleting the semantic memory)."""

from __future__ import annotations

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

DAY_MS = 86_400_000
T0 = 1_700_000_000_000
REPEATS = ["Caroline: Walked Max on Carcavelos beach this morning",       # e5 cosine ~0.97 to each other: not
           "Caroline: Max had a great time on Carcavelos beach",          # near-duplicates (0.985), but one
           "Caroline: Max and I spent the afternoon on Carcavelos beach"]  # thing said three times
OTHER = ["Melanie: I painted a sunset over the lake last weekend", "Melanie: My kids started swimming lessons",
         "Caroline: I am reading a book about adoption agencies"]


def _write(c, tenant: str) -> list[str]:  # type: ignore[no-untyped-def]
    items = [pb.MemoryInput(content=t, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=T0 + i * 3 * DAY_MS, source_ref=f"D{i}:1")
             for i, t in enumerate(REPEATS)]
    items += [pb.MemoryInput(content=t, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=T0 + i * DAY_MS) for i, t in enumerate(OTHER)]
    reply = c.memory.Write(spb.WriteRequest(tenant_id=tenant, memories=items), metadata=c.metadata)
    return [r.memory_id for r in reply.results]


def _consolidate(c, tenant: str, **kw) -> spb.ConsolidateResponse:  # type: ignore[no-untyped-def]
    return c.memory.Consolidate(spb.ConsolidateRequest(tenant_id=tenant, **kw), metadata=c.metadata)


def test_consolidate_rpc_search_audit_and_undo(server) -> None:  # type: ignore[no-untyped-def]
    c = server.client()
    c.create_tenant("c")
    ids = _write(c, "c")
    dry = _consolidate(c, "c", dry_run=True)
    assert dry.clusters == 1 and sorted(dry.consolidations[0].consolidates) == sorted(ids[:3])
    assert dry.consolidations[0].memory_id == ""
    reply = _consolidate(c, "c")
    assert reply.clusters == 1 and reply.consolidated == 3
    sem_id = reply.consolidations[0].memory_id
    assert _consolidate(c, "c").clusters == 0                              # idempotent
    [sem] = c.memory.Get(spb.GetRequest(tenant_id="c", memory_ids=[sem_id]), metadata=c.metadata).memories
    assert sem.type == pb.MEMORY_TYPE_SEMANTIC and sorted(sem.consolidates) == sorted(ids[:3])
    assert sorted(sem.source_refs) == sorted(ids[:3]) and sem.content in REPEATS
    members = c.memory.Get(spb.GetRequest(tenant_id="c", memory_ids=ids[:3]), metadata=c.metadata).memories
    assert {(m.status, m.consolidated_into) for m in members} == {(pb.MEMORY_STATUS_CONSOLIDATED, sem_id)}
    assert abs(sem.importance - (max(m.importance for m in members) + 0.2)) < 1e-5    # + 0.1 per repeat
    hits = c.search("c", "Where does Max like to go?", top_k=4).hits
    contents = [h.memory.content for h in hits]
    assert hits[0].memory.memory_id == sem_id and sum(t in REPEATS for t in contents) == 1   # one, not three copies
    history = c.search("c", "Where does Max like to go?", top_k=6,
                       filter=pb.Filter(statuses=[pb.MEMORY_STATUS_CONSOLIDATED])).hits
    assert sorted(h.memory.memory_id for h in history) == sorted(ids[:3])   # the episodes are kept, as history
    audit = c.memory.Audit(spb.AuditRequest(tenant_id="c", ops=[spb.AUDIT_OP_CONSOLIDATE]), metadata=c.metadata)
    assert sorted((r.memory_id, r.related_id) for e in audit.entries for r in e.refs) == sorted(
        (i, sem_id) for i in ids[:3])
    c.memory.Delete(spb.DeleteRequest(tenant_id="c", memory_ids=[sem_id]), metadata=c.metadata)   # the undo
    members = c.memory.Get(spb.GetRequest(tenant_id="c", memory_ids=ids[:3]), metadata=c.metadata).memories
    assert {(m.status, m.consolidated_into) for m in members} == {(pb.MEMORY_STATUS_ACTIVE, "")}
    assert sum(h.memory.content in REPEATS for h in c.search("c", "Where does Max like to go?", top_k=4).hits) == 3


# Two long turns that share most of their words (e5 cosine ~0.98: under the near-duplicate threshold, over
# consolidation's) and each say something the other does not.
BEACH = ("The tide was out, the sand was firm and he ran for ages after the gulls. We stopped at the kiosk by the "
         "lifeguard tower for a coffee and a bowl of water for him, then walked back along the promenade while the "
         "surfers were getting ready. He slept the whole afternoon after that, so I got some reading done on the "
         "balcony while the neighbours argued about parking. ")
LONG = ["Caroline: Walked Max on Carcavelos beach this morning. " + BEACH
        + "Oh, and I finally told my manager that I am leaving the bank at the end of the month.",
        "Caroline: Max and I spent the day on Carcavelos beach again. " + BEACH
        + "Oh, and my sister called to say she is moving to Lisbon next spring with her kids."]


def test_long_turns_are_not_folded_into_one(server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from server.hygiene import consolidate

    assert all(len(t) > consolidate.MAX_CHARS for t in LONG)
    c = server.client()
    c.create_tenant("long")
    items = [pb.MemoryInput(content=t, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=T0 + i * 3 * DAY_MS)
             for i, t in enumerate(LONG)]
    ids = [r.memory_id for r in c.memory.Write(spb.WriteRequest(tenant_id="long", memories=items),
                                               metadata=c.metadata).results]
    assert len(set(ids)) == 2                                                 # not merged as near-duplicates
    assert _consolidate(c, "long", dry_run=True).clusters == 0
    monkeypatch.setattr(consolidate, "MAX_CHARS", 10**6)                      # without the limit they would fold
    dry = _consolidate(c, "long", dry_run=True)
    assert dry.clusters == 1 and sorted(dry.consolidations[0].consolidates) == sorted(ids)
