"""Updates without keys through the real server (e5, FAISS, Lucene, the bundled cross-encoder): a write that
restates an attribute with a new value links to the older memory, a search ranks the newer one first unless the
query asks about the past, History shows the link, and LinkUpdate undoes it (audited; bad input changes nothing)."""

from __future__ import annotations

import time

import grpc
import pytest
from support import start_server, status_of

from server.config import BUNDLED_RERANKER, bundled_reranker
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

T = "acme/updates"
DAY_MS = 86_400_000
THINKPAD = "My laptop is a ThinkPad X1 Carbon"
FRAMEWORK = "I switched to a Framework 13 laptop"


@pytest.fixture(scope="module")
def linked(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path_factory.mktemp("updates") / "data", embedder=embedder,
                           models={"reranker": "bundled"})
    client = running.client()
    client.create_tenant(T)
    now = int(time.time() * 1000)
    old = client.write(T, pb.MemoryInput(content=THINKPAD, created_at_ms=now - 90 * DAY_MS),
                       pb.MemoryInput(content="My sister's laptop is a Chromebook", created_at_ms=now - 60 * DAY_MS),
                       pb.MemoryInput(content="I switched to a standing desk at work", created_at_ms=now - 20 * DAY_MS,
                                      scope="office")).results
    new = client.write(T, pb.MemoryInput(content=FRAMEWORK, created_at_ms=now - 10 * DAY_MS)).results[0]
    yield running, client, old[0].memory_id, new
    running.stop()


def _first(client, text: str) -> pb.Hit:  # type: ignore[no-untyped-def]
    return client.search(T, text, top_k=3).hits[0]


def test_the_write_links_the_new_laptop_to_the_old_one_and_nothing_else(linked) -> None:
    _, client, thinkpad_id, new = linked
    assert list(new.updates) == [thinkpad_id]
    by_content = {m.content: m for m in client.list_all(T)}
    assert by_content[THINKPAD].updated_by == new.memory_id
    assert by_content[THINKPAD].status == pb.MEMORY_STATUS_ACTIVE   # nothing is superseded or deleted
    assert not by_content["My sister's laptop is a Chromebook"].updated_by   # another subject
    assert not by_content["I switched to a standing desk at work"].updates


def test_now_ranks_the_new_laptop_first_and_before_the_old_one(linked) -> None:
    _, client, thinkpad_id, new = linked
    now = _first(client, "which laptop do I use now")
    assert now.memory.memory_id == new.memory_id
    assert now.breakdown.time_intent == pb.TIME_INTENT_CURRENT
    before = _first(client, "which laptop did I have before")
    assert before.memory.memory_id == thinkpad_id
    assert before.breakdown.time_intent == pb.TIME_INTENT_PAST
    hits = client.search(T, "which laptop did I have before", top_k=3).hits
    framework = next(h for h in hits if h.memory.memory_id == new.memory_id)
    assert framework.breakdown.update < 1.0   # the newer one is what the past question does not ask for


def test_history_shows_the_link_from_either_end(linked) -> None:
    _, client, thinkpad_id, new = linked
    for start in (thinkpad_id, new.memory_id):
        reply = client.memory.History(spb.HistoryRequest(tenant_id=T, memory_id=start), metadata=client.metadata)
        assert [v.memory_id for v in reply.versions] == [thinkpad_id, new.memory_id]
        assert reply.latest_id == new.memory_id


def test_link_update_undoes_the_link_and_makes_it_again_audited(linked) -> None:
    _, client, thinkpad_id, new = linked

    def link(unlink: bool, memory_id: str = new.memory_id, updates_id: str = thinkpad_id):  # type: ignore[no-untyped-def]
        return client.memory.LinkUpdate(spb.LinkUpdateRequest(tenant_id=T, memory_id=memory_id, updates_id=updates_id,
                                                              unlink=unlink), metadata=client.metadata)

    undone = link(True)
    assert not undone.updated.updated_by and not undone.memory.updates
    hit = next(h for h in client.search(T, "which laptop do I use now", top_k=3).hits if h.memory.memory_id == thinkpad_id)
    assert hit.breakdown.update == pytest.approx(1.0)   # unlinked: no longer demoted
    assert status_of(lambda: link(True)) == grpc.StatusCode.FAILED_PRECONDITION   # nothing to unlink
    assert status_of(lambda: link(False, "m_missing")) == grpc.StatusCode.NOT_FOUND
    assert status_of(lambda: link(False, thinkpad_id, thinkpad_id)) == grpc.StatusCode.INVALID_ARGUMENT
    assert not client.get(T, thinkpad_id).memories[0].updated_by   # the bad calls changed nothing
    again = link(False)
    assert again.updated.updated_by == new.memory_id and list(again.memory.updates) == [thinkpad_id]
    assert status_of(lambda: link(False, thinkpad_id, new.memory_id)) == grpc.StatusCode.INVALID_ARGUMENT   # a cycle
    audit = client.memory.Audit(spb.AuditRequest(tenant_id=T, memory_id=thinkpad_id, page_size=50),
                                metadata=client.metadata).entries
    ops = [e.op for e in audit]
    assert spb.AUDIT_OP_UNLINK in ops and ops.count(spb.AUDIT_OP_UPDATE_LINK) == 2   # the write's link, then ours
    other = client.create_key(tenant_ids=["acme/other"])
    stranger = spb.LinkUpdateRequest(tenant_id=T, memory_id=new.memory_id, updates_id=thinkpad_id, unlink=True)
    assert status_of(lambda: client.memory.LinkUpdate(stranger, metadata=[("authorization", f"Bearer {other}")])
                     ) == grpc.StatusCode.PERMISSION_DENIED


def test_newest_first_orders_unlinked_statements_of_one_attribute_in_the_slots_they_held(linked, monkeypatch) -> None:
    # ranking.NEWEST_FIRST (on by default: docs/concepts/updates.md) through the real ranking stage: two market trips
    # (both true, never linked) answer "what did I buy at the market?" newest first, at top_k 1 as at top_k 3.
    from server.engine import ranking
    _, client, _, _ = linked
    tenant = "acme/newest-first"
    client.create_tenant(tenant)
    now = int(time.time() * 1000)
    older, newer, _ = client.write(
        tenant, pb.MemoryInput(content="Bought apples and cheese at the market", created_at_ms=now - 90 * DAY_MS),
        pb.MemoryInput(content="Bought fresh figs and sourdough at the market", created_at_ms=now - 2 * DAY_MS),
        pb.MemoryInput(content="My cat is called Miso", created_at_ms=now - 30 * DAY_MS)).results
    q = "what did I buy at the market?"
    assert ranking.NEWEST_FIRST
    monkeypatch.setattr(ranking, "NEWEST_FIRST", False)
    off = [h.memory.memory_id for h in client.search(tenant, q, top_k=3).hits]
    assert off.index(older.memory_id) < off.index(newer.memory_id)   # relevance prefers the apples (0.57 vs 0.27)
    monkeypatch.setattr(ranking, "NEWEST_FIRST", True)
    hits = client.search(tenant, q, top_k=3).hits
    order = [h.memory.memory_id for h in hits]
    assert sorted(order.index(m) for m in (older.memory_id, newer.memory_id)) == sorted(
        off.index(m) for m in (older.memory_id, newer.memory_id))   # the pair holds the slots it held
    assert order.index(newer.memory_id) < order.index(older.memory_id)
    assert hits[order.index(older.memory_id)].breakdown.update < 1.0
    assert [h.breakdown.final for h in hits] == sorted((h.breakdown.final for h in hits), reverse=True)
    assert client.search(tenant, q, top_k=1).hits[0].memory.memory_id == order[0]
