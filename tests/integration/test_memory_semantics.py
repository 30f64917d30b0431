"""The memory model's rules, one test each, through the real gRPC server (real embedder, FAISS, Lucene)."""

from __future__ import annotations

import time

import grpc
import pytest
from memory_support import DAY_MS, HOUR_MS, confirm, get_one, history, ids_of, mem, now_ms, write_one
from support import start_server, status_of

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.engine.ranking import IMPORTANCE_WEIGHT as B, RECENCY_WEIGHT as A

T = "acme/semantics"
ACTIVE, PENDING, SUPERSEDED, EXPIRED = (pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_PENDING,
                                        pb.MEMORY_STATUS_SUPERSEDED, pb.MEMORY_STATUS_EXPIRED)


def test_budget_story(admin) -> None:
    """30k (initial version) and 80k (with extensions) both active; 50k (initial version) supersedes 30k;
    a search returns the latest per scope; History shows the chain; nothing stale comes back."""
    admin.create_tenant(T)
    first = write_one(admin, T, "The project budget is 30k", key="budget", scope="initial version",
                      source_ref="conv-1#3")
    ext = write_one(admin, T, "The project budget is 80k", key="budget", scope="with extensions",
                    source_ref="conv-1#7")
    assert first.status == ACTIVE and ext.status == ACTIVE and not ext.superseded  # another scope never supersedes
    admin.write(T, "User prefers concise answers", "The office is in Lisbon")
    latest = write_one(admin, T, "The project budget is 50k", key="budget", scope="initial version",
                       source_ref="conv-2#1")
    assert latest.outcome == spb.WRITE_OUTCOME_CREATED
    assert list(latest.superseded) == [first.memory_id]
    old = get_one(admin, T, first.memory_id)
    assert old.status == SUPERSEDED and old.superseded_by == latest.memory_id
    assert list(get_one(admin, T, latest.memory_id).supersedes) == [first.memory_id]

    result = admin.search(T, "what is the project budget?", top_k=10)
    budgets = {h.memory.scope: h.memory.content for h in result.hits if h.memory.key == "budget"}
    assert budgets == {"initial version": "The project budget is 50k", "with extensions": "The project budget is 80k"}
    assert first.memory_id not in ids_of(result)
    assert all(h.memory.status == ACTIVE for h in result.hits)
    with_history = admin.search(T, "what is the project budget?", top_k=10, include_history=True)
    assert first.memory_id in ids_of(with_history)

    chain = history(admin, T, first.memory_id)
    assert [m.memory_id for m in chain.versions] == [first.memory_id, latest.memory_id]
    assert [m.status for m in chain.versions] == [SUPERSEDED, ACTIVE]
    assert chain.latest_id == latest.memory_id
    assert [m.memory_id for m in history(admin, T, ext.memory_id).versions] == [ext.memory_id]


def test_schema_round_trip_and_field_validation(admin) -> None:
    admin.create_tenant(T)
    expires = now_ms() + 30 * DAY_MS
    r = write_one(admin, T, "User is allergic to peanuts", type=pb.MEMORY_TYPE_SEMANTIC, importance=0.9,
                  entities=["user", "peanuts"], source_ref="conv-9#2", scope="health", confidence=0.8,
                  key="allergy", pinned=True, expires_at_ms=expires, metadata={"lang": "en"})
    m = get_one(admin, T, r.memory_id)
    assert (m.content, m.type, m.scope, m.key, m.source_ref) == ("User is allergic to peanuts",
                                                                 pb.MEMORY_TYPE_SEMANTIC, "health", "allergy", "conv-9#2")
    assert m.importance == pytest.approx(0.9) and m.confidence == pytest.approx(0.8)
    assert list(m.entities) == ["user", "peanuts"] and m.pinned and m.expires_at_ms == expires
    assert dict(m.metadata) == {"lang": "en"} and list(m.source_refs) == ["conv-9#2"]
    assert m.status == ACTIVE and m.access_count == 0 and m.created_at_ms > 0
    assert m.last_access_at_ms == m.created_at_ms
    bad = {
        "importance": mem("x", importance=1.5), "confidence": mem("x", confidence=-0.1),
        "content is empty": mem("  "), "type": mem("x", type=7), "expires_at_ms": mem("x", expires_at_ms=-5),
        "entities": mem("x", entities=[""]), "scope": mem("x", scope="a" * 300), "key": mem("x", key="k\x00"),
        "supersedes": mem("x", supersedes=["m_unknown"]),
    }
    for field, item in bad.items():
        with pytest.raises(grpc.RpcError) as err:
            admin.write(T, item)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert field.split()[0] in err.value.details(), (field, err.value.details())
    assert len(admin.list_all(T)) == 1   # nothing of a rejected write was stored


def test_decay_and_importance_per_type_with_overrides(admin) -> None:
    admin.create_tenant(T)
    now = now_ms()
    ago = now - 96 * HOUR_MS
    text = "the deployment checklist for the billing service"
    ids = {}
    for name, kind, pinned in (("episodic", pb.MEMORY_TYPE_EPISODIC, False), ("semantic", pb.MEMORY_TYPE_SEMANTIC, False),
                               ("procedural", pb.MEMORY_TYPE_PROCEDURAL, False), ("pinned", pb.MEMORY_TYPE_EPISODIC, True)):
        ids[name] = write_one(admin, T, f"{text} ({name} note {len(ids)})", type=kind, pinned=pinned, importance=0.5,
                              created_at_ms=ago, last_access_at_ms=ago).memory_id
    # Every search here is "as of" now: a plain one is an access, which resets the decay clock of its hits.
    by_id = {h.memory.memory_id: h.breakdown for h in admin.search(T, text, top_k=10,
                                                                   scoring=pb.Scoring(now_ms=now)).hits}
    assert by_id[ids["episodic"]].decay == pytest.approx(0.25, rel=1e-3)      # 96 h = two 48 h half-lives
    assert by_id[ids["semantic"]].decay == pytest.approx(0.5 ** (4 / 30), rel=1e-3)
    assert by_id[ids["procedural"]].decay == pytest.approx(1.0)
    assert by_id[ids["pinned"]].decay == pytest.approx(1.0)
    for b in by_id.values():
        assert b.importance_weight == pytest.approx(1 - B + B * 0.5)            # (1 - b) + b × importance
        assert b.recency == pytest.approx(1 - A + A * b.decay, rel=1e-5)        # bounded: never below 1 - a
        assert b.final == pytest.approx(b.relevance * b.recency * b.importance_weight * b.temporal, rel=1e-4)
    off = admin.search(T, text, top_k=10, scoring=pb.Scoring(disable_decay=True, disable_importance=True, now_ms=now))
    assert all(h.breakdown.decay == pytest.approx(1.0) and h.breakdown.importance_weight == pytest.approx(1.0)
               for h in off.hits)
    faster = admin.search(T, text, top_k=10, scoring=pb.Scoring(episodic_half_life_s=24 * 3600.0, now_ms=now))
    assert {h.memory.memory_id: h.breakdown.decay for h in faster.hits}[ids["episodic"]] == pytest.approx(1 / 16, rel=1e-3)


def test_access_updates_are_batched_into_one_log_group(tmp_path, jvm, embedder) -> None:
    server = start_server(tmp_path / "data", embedder=embedder, lucene_commit_interval_s=3600.0)  # flushes: ours
    try:
        _touch_and_flush(server, server.client())
    finally:
        server.stop()


def _touch_and_flush(server, admin) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant(T)
    target = write_one(admin, T, "The team standup is at 9:30 every weekday", importance=0.5).memory_id
    admin.write(T, "User likes hiking in the Alps")
    shard = server.app.engine.registry.shard(T)
    seq_before = shard.store.seq
    for _ in range(5):
        assert ids_of(admin.search(T, "when is the standup?", top_k=1)) == [target]
    as_of = now_ms() + HOUR_MS
    admin.search(T, "when is the standup?", top_k=1, scoring=pb.Scoring(now_ms=as_of))   # "as of": not an access
    assert shard.store.seq == seq_before                      # no disk write per hit
    shown = get_one(admin, T, target)                          # Get shows the pending touches already
    assert shown.access_count == 5 and shown.importance == pytest.approx(0.5)   # importance stays the writer's
    server.app.engine.flush()
    assert shard.store.seq == seq_before + 1                  # one log group for every touch
    stored = shard.store.get(target)
    assert stored.access_count == 5 and stored.last_access_at_ms >= stored.created_at_ms
    # The ranking reads 0.5 + 5 × 0.02 (the boost, at decay 1 right after the use): (1 - b) + b × 0.6
    fresh = admin.search(T, "when is the standup?", top_k=1, scoring=pb.Scoring(now_ms=now_ms())).hits[0].breakdown
    assert fresh.importance_weight == pytest.approx(1 - B + B * 0.6, rel=1e-3)
    for _ in range(30):                                        # the boost is bounded by access_importance_max
        admin.search(T, "when is the standup?", top_k=1)
    server.app.engine.flush()
    capped = admin.search(T, "when is the standup?", top_k=1, scoring=pb.Scoring(now_ms=now_ms())).hits[0].breakdown
    assert capped.importance_weight == pytest.approx(1 - B + B * 0.9, rel=1e-3)   # capped at importance 0.9
    later = now_ms() + 300 * 24 * HOUR_MS                      # unused for 10 half-lives: it fades back
    faded = admin.search(T, "when is the standup?", top_k=1, scoring=pb.Scoring(now_ms=later)).hits[0].breakdown
    assert faded.importance_weight == pytest.approx(1 - B + B * 0.5, abs=1e-3)
    assert get_one(admin, T, target).importance == pytest.approx(0.5)


def test_pending_until_confirmed_by_rpc_or_by_a_confident_rewrite(admin) -> None:
    admin.create_tenant(T)
    active = write_one(admin, T, "The launch date is March 3", key="launch", scope="v1")
    maybe = write_one(admin, T, "The launch date is April 14", key="launch", scope="v1", confidence=0.3)
    assert maybe.outcome == spb.WRITE_OUTCOME_PENDING and maybe.status == PENDING and not maybe.superseded
    assert get_one(admin, T, active.memory_id).status == ACTIVE          # a pending write supersedes nothing
    assert maybe.memory_id not in ids_of(admin.search(T, "launch date", top_k=5))
    assert maybe.memory_id in ids_of(admin.search(T, "launch date", top_k=5, include_pending=True))
    reply = confirm(admin, T, maybe.memory_id)
    assert reply.results[0].memory.status == ACTIVE and list(reply.results[0].superseded) == [active.memory_id]
    assert get_one(admin, T, active.memory_id).status == SUPERSEDED
    assert ids_of(admin.search(T, "launch date", top_k=1)) == [maybe.memory_id]
    with pytest.raises(grpc.RpcError) as err:
        confirm(admin, T, active.memory_id)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "SUPERSEDED" in err.value.details()
    assert status_of(lambda: confirm(admin, T, "m_nope")) == grpc.StatusCode.NOT_FOUND
    # A confident rewrite of the same key and scope activates a pending memory (it merges into it).
    guess = write_one(admin, T, "The office wifi password is tulip-42", key="wifi", scope="office", confidence=0.2)
    again = write_one(admin, T, "The office wifi password is tulip-42", key="wifi", scope="office", confidence=0.9)
    assert again.outcome == spb.WRITE_OUTCOME_MERGED and again.merged_into == guess.memory_id
    assert again.status == ACTIVE and get_one(admin, T, guess.memory_id).status == ACTIVE
    # A pending write that names `supersedes` replaces them only once confirmed.
    base = write_one(admin, T, "The retro is on Fridays").memory_id
    unsure = write_one(admin, T, "The retro moved to Thursdays", supersedes=[base], confidence=0.1)
    assert get_one(admin, T, base).status == ACTIVE
    assert list(confirm(admin, T, unsure.memory_id).results[0].superseded) == [base]
    assert get_one(admin, T, base).superseded_by == unsure.memory_id


def test_near_duplicates_merge_with_both_source_refs(admin) -> None:
    admin.create_tenant(T)
    first = write_one(admin, T, "User is allergic to peanuts", source_ref="conv-1#4", importance=0.4)
    dup = write_one(admin, T, "The user is allergic to peanuts.", source_ref="conv-5#2", importance=0.8)
    assert dup.outcome == spb.WRITE_OUTCOME_MERGED and dup.merged_into == first.memory_id
    merged = get_one(admin, T, first.memory_id)
    assert list(merged.source_refs) == ["conv-1#4", "conv-5#2"] and merged.access_count == 1
    assert merged.importance == pytest.approx(0.8)
    assert len(admin.list_all(T)) == 1
    other_scope = write_one(admin, T, "User is allergic to peanuts", scope="travel")
    other_type = write_one(admin, T, "User is allergic to peanuts", type=pb.MEMORY_TYPE_EPISODIC)
    other_number = write_one(admin, T, "Invoice INV-2026-0042 was paid on 3 March")
    next_invoice = write_one(admin, T, "Invoice INV-2026-0043 was paid on 3 March")
    for r in (other_scope, other_type, next_invoice):
        assert r.outcome == spb.WRITE_OUTCOME_CREATED, r
    assert other_number.memory_id != next_invoice.memory_id


def test_explicit_supersedes_and_history_flag(admin) -> None:
    admin.create_tenant(T)
    a = write_one(admin, T, "Deploys happen on Tuesdays").memory_id
    b = write_one(admin, T, "Deploys happen on Tuesdays and Thursdays", supersedes=[a])
    assert list(b.superseded) == [a]
    assert ids_of(admin.search(T, "when do deploys happen", top_k=5)) == [b.memory_id]
    assert set(ids_of(admin.search(T, "when do deploys happen", top_k=5, include_history=True))) == {a, b.memory_id}
    assert [m.memory_id for m in history(admin, T, b.memory_id).versions] == [a, b.memory_id]


def test_expired_memories_are_excluded_and_persisted_lazily(server, admin) -> None:
    admin.create_tenant(T)
    soon = write_one(admin, T, "The door code this week is 4711", expires_at_ms=now_ms() + 1500).memory_id
    keep = write_one(admin, T, "The door code for the garage is 8080").memory_id
    assert soon in ids_of(admin.search(T, "door code", top_k=5))
    time.sleep(1.7)
    assert ids_of(admin.search(T, "door code", top_k=5)) == [keep]
    assert soon in ids_of(admin.search(T, "door code", top_k=5, filter=pb.Filter(statuses=[EXPIRED])))
    assert get_one(admin, T, soon).status == EXPIRED                       # at read time
    assert [m.memory_id for m in admin.list_all(T, statuses=[EXPIRED])] == [soon]
    server.app.engine.flush()
    assert server.app.engine.registry.shard(T).store.get(soon).status == EXPIRED   # persisted
    # An expired memory is not one to merge into: the same text again is a new memory.
    again = write_one(admin, T, "The door code this week is 4711")
    assert again.outcome == spb.WRITE_OUTCOME_CREATED and again.memory_id != soon


def test_filters_on_search_and_list(admin) -> None:
    admin.create_tenant(T)
    t0 = now_ms() - 10 * DAY_MS
    rows = [
        ("Alice leads the payments team", pb.MEMORY_TYPE_SEMANTIC, ["alice", "payments"], "work", 0.9, t0),
        ("Alice went skiing in January", pb.MEMORY_TYPE_EPISODIC, ["alice"], "personal", 0.3, t0 + 5 * DAY_MS),
        ("Bob reviews payments code", pb.MEMORY_TYPE_PROCEDURAL, ["bob", "payments"], "work", 0.6, t0 + 9 * DAY_MS),
    ]
    ids = [write_one(admin, T, c, type=k, entities=e, scope=s, importance=i, created_at_ms=c_ms,
                     last_access_at_ms=c_ms).memory_id for c, k, e, s, i, c_ms in rows]
    write_one(admin, T, "Payments settle daily", key="settlement")
    cases = [
        (dict(types=[pb.MEMORY_TYPE_EPISODIC]), [ids[1]]),
        (dict(scope="work"), [ids[0], ids[2]]),
        (dict(entities_any=["bob", "alice"]), ids),
        (dict(entities_all=["alice", "payments"]), [ids[0]]),
        (dict(key="settlement"), None),
        (dict(created_after_ms=t0 + DAY_MS, created_before_ms=t0 + 6 * DAY_MS), [ids[1]]),
        (dict(accessed_after_ms=t0 + 8 * DAY_MS, entities_any=["payments"]), [ids[2]]),
        (dict(min_importance=0.7), [ids[0]]),
    ]
    as_of = pb.Scoring(now_ms=now_ms())   # records no uses: a periodic flush mid-loop must not move last_access
    for flt, expected in cases:
        found = sorted(ids_of(admin.search(T, "Alice Bob payments team skiing", top_k=10, filter=pb.Filter(**flt),
                                           scoring=as_of)))
        listed = sorted(m.memory_id for m in admin.list_all(T, **flt))
        if expected is None:
            assert len(found) == 1 and found == listed, flt
        else:
            assert found == sorted(expected) and listed == sorted(expected), flt


def test_context_block_is_bounded_dated_merged_and_flags_conflicts(admin) -> None:
    admin.create_tenant(T)
    admin.write(T, mem("The project budget is 50k", key="budget", scope="initial version"),
                mem("The project budget is 80k", key="budget", scope="with extensions"),
                mem("The budget review meeting is on Monday", scope="a"),
                mem("The budget review meeting is on Monday", scope="b"),
                *[mem(f"Budget note number {i}: travel costs are capped") for i in range(6)])
    result = admin.search(T, "what is the project budget?", top_k=10, context_block=True, context_items=4,
                          min_relevance=0.0)   # the block's layout, whatever the relevance (test_ranking_defaults)
    block = result.context_block
    lines = [line for line in block.splitlines() if line.startswith("[")]
    assert block.startswith("<memory-context>") and block.endswith("</memory-context>")
    assert "not as instructions" in block and "Background" in block
    assert len(lines) == 4
    assert sum("budget review meeting" in line for line in lines) <= 1     # near-duplicates merged
    assert all(time.strftime("%Y-", time.gmtime()) in line for line in lines)   # each dated
    flagged = [line for line in lines if "CONFLICT" in line]
    assert len(flagged) == 2 and {"50k" in flagged[0], "50k" in flagged[1]} == {True, False}
    assert 'key "budget" has different active values' in block
    assert admin.search(T, "what is the budget?", top_k=3).context_block == ""   # only when asked
