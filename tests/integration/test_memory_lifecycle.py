"""Forgetting, purges, the capacity cap, cold start and the audit log, through the real gRPC server."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest
from memory_support import (DAY_MS, audit, delete_tenant, forget, get_one, history, ids_of, mem, now_ms,
                            write_one)
from support import start_server, status_of

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

SECRET = "zebracorn-7781 launch codes for tenant A"


def _files_containing(root: Path, needle: bytes, *, skip: str = "lucene") -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and skip not in p.parts and needle in p.read_bytes()]


def test_delete_tenant_purges_everything_and_leaves_other_tenants_alone(server, admin) -> None:
    for tenant in ("acme/a", "acme/b"):
        admin.create_tenant(tenant)
    a_ids = [r.memory_id for r in admin.write("acme/a", SECRET, "tenant A likes blue", "tenant A budget is 5k").results]
    b_ids = [r.memory_id for r in admin.write("acme/b", "zebracorn-7781 is tenant B's own note too",
                                              "tenant B likes green").results]
    errors: list[BaseException] = []
    stop = threading.Event()

    def hammer(tenant: str) -> None:   # concurrent searches while the purge runs
        client = server.client()
        while not stop.is_set():
            try:
                client.search(tenant, "zebracorn-7781 launch codes", top_k=5)
            except grpc.RpcError as exc:
                if tenant == "acme/b" or exc.code() != grpc.StatusCode.NOT_FOUND:
                    errors.append(exc)
                    return

    threads = [threading.Thread(target=hammer, args=(t,)) for t in ("acme/a", "acme/b", "acme/a")]
    for t in threads:
        t.start()
    reply = delete_tenant(admin, "acme/a")
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert reply.deleted_memories == 3
    not_found = grpc.StatusCode.NOT_FOUND
    assert status_of(lambda: admin.search("acme/a", "launch codes")) == not_found
    assert status_of(lambda: admin.list_all("acme/a")) == not_found
    assert status_of(lambda: admin.get("acme/a", a_ids[0])) == not_found
    assert status_of(lambda: admin.write("acme/a", "late write")) == not_found
    assert status_of(lambda: delete_tenant(admin, "acme/a")) == not_found
    assert "acme/a" not in admin.admin.ListTenants(spb.ListTenantsRequest(), metadata=admin.metadata).tenant_ids
    # Tenant B is untouched: every memory, searchable, listable.
    assert sorted(m.memory_id for m in admin.list_all("acme/b")) == sorted(b_ids)
    assert ids_of(admin.search("acme/b", "zebracorn-7781", top_k=5))[0] == b_ids[0]
    # Nothing of tenant A is left on disk, and a new tenant with the same id starts empty.
    assert _files_containing(server.data_dir, b"launch codes for tenant A", skip="none") == []
    admin.create_tenant("acme/a")
    assert admin.list_all("acme/a") == [] and admin.search("acme/a", "launch codes").hits == []


def test_forget_archives_or_purges_by_filter(tmp_path: Path, jvm, embedder) -> None:
    server = start_server(tmp_path / "data", embedder=embedder)
    try:
        _forget_then_restart(server, server.client(), embedder)
    finally:
        server.stop()


def _forget_then_restart(server, admin, embedder) -> None:  # type: ignore[no-untyped-def]
    t = "acme/forget"
    admin.create_tenant(t)
    old = now_ms() - 40 * DAY_MS
    task = [write_one(admin, t, f"Task 17 scratch note {i}: the draft table is named tmp_{i}", scope="task-17",
                      created_at_ms=old, source_ref=f"conv-17#{i}").memory_id for i in range(3)]
    fresh = write_one(admin, t, "Task 17 final decision: ship the table as orders_v2", scope="task-17").memory_id
    pinned = write_one(admin, t, "Task 17 owner is Dana", scope="task-17", pinned=True, created_at_ms=old).memory_id
    other = write_one(admin, t, "The user's name is Sam", created_at_ms=old).memory_id
    assert status_of(lambda: forget(admin, t)) == grpc.StatusCode.INVALID_ARGUMENT       # no filter: refused
    assert status_of(lambda: forget(admin, t, older_than_ms=-1)) == grpc.StatusCode.INVALID_ARGUMENT
    dry = forget(admin, t, filter=pb.Filter(scope="task-17"), older_than_ms=30 * DAY_MS, dry_run=True)
    assert dry.count == 3 and sorted(dry.memory_ids) == sorted(task)
    assert all(get_one(admin, t, i).status == pb.MEMORY_STATUS_ACTIVE for i in task)
    archived = forget(admin, t, filter=pb.Filter(scope="task-17"), older_than_ms=30 * DAY_MS)
    assert sorted(archived.memory_ids) == sorted(task)
    assert all(get_one(admin, t, i).status == pb.MEMORY_STATUS_ARCHIVED for i in task)
    assert get_one(admin, t, pinned).status == pb.MEMORY_STATUS_ACTIVE                   # pinned: skipped
    hits = ids_of(admin.search(t, "task 17 draft table", top_k=10))
    assert not set(task) & set(hits) and fresh in hits
    # Purge: gone from search, list, get, the log; the other memories stay.
    purged = forget(admin, t, filter=pb.Filter(scope="task-17"), mode=spb.FORGET_MODE_DELETE, include_pinned=True)
    assert purged.count == 5
    assert [m.memory_id for m in admin.list_all(t)] == [other]
    assert admin.get(t, *task, fresh).memories == []
    assert ids_of(admin.search(t, "task 17 draft table orders owner Dana", top_k=10)) == [other]
    tenant_dir = server.app.engine.registry.directory(t)
    assert _files_containing(tenant_dir, b"draft table is named") == []   # the log was rewritten without them
    server.stop()
    server.stop = lambda: None   # type: ignore[method-assign]
    again = start_server(server.data_dir, embedder=embedder)   # and a restart keeps it so
    try:
        client = again.client()
        assert [m.memory_id for m in client.list_all(t)] == [other]
        assert ids_of(client.search(t, "draft table tmp_1", top_k=5)) in ([], [other])
    finally:
        again.stop()


def test_delete_strips_history_links(admin) -> None:
    t = "acme/links"
    admin.create_tenant(t)
    a = write_one(admin, t, "Standup is at 9", key="standup").memory_id
    b = write_one(admin, t, "Standup is at 10", key="standup").memory_id
    c = write_one(admin, t, "Standup is at 11", key="standup").memory_id
    assert [m.memory_id for m in history(admin, t, c).versions] == [a, b, c]
    assert admin.delete(t, b).deleted == 1
    assert [m.memory_id for m in history(admin, t, a).versions] == [a]
    assert [m.memory_id for m in history(admin, t, c).versions] == [c]
    assert b not in get_one(admin, t, c).supersedes and get_one(admin, t, a).superseded_by == ""


def test_capacity_cap_archives_the_least_valuable_never_pinned(tmp_path: Path, jvm, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, memory={"capacity_per_tenant": 3})
    try:
        client = running.client()
        t = "acme/cap"
        client.create_tenant(t)
        long_ago = now_ms() - 20 * DAY_MS
        pinned = write_one(client, t, "User is allergic to shellfish", pinned=True, importance=0.05,
                           created_at_ms=long_ago, last_access_at_ms=long_ago).memory_id
        stale = write_one(client, t, "User visited a museum on a rainy day", type=pb.MEMORY_TYPE_EPISODIC,
                          importance=0.9, created_at_ms=long_ago, last_access_at_ms=long_ago).memory_id
        keep = write_one(client, t, "User works at a bakery", importance=0.6).memory_id
        new = write_one(client, t, "User's favourite colour is teal", importance=0.2).memory_id
        statuses = {m.memory_id: m.status for m in client.list_all(t)}
        # The 20-day-old episodic memory decayed to 0.9 × 0.5^10 ≈ 0.001: the least valuable.
        assert statuses[stale] == pb.MEMORY_STATUS_ARCHIVED
        assert statuses[pinned] == statuses[keep] == statuses[new] == pb.MEMORY_STATUS_ACTIVE
        for i in range(3):
            write_one(client, t, f"Filler fact number {i} about the weather {i * 7}", importance=0.5)
        live = [m for m in client.list_all(t) if m.status == pb.MEMORY_STATUS_ACTIVE]
        assert len(live) == 3 and pinned in {m.memory_id for m in live}
        archive = audit(client, t, ops=[spb.AUDIT_OP_ARCHIVE])
        assert archive and all(e.note == "capacity" for e in archive)
    finally:
        running.stop()


def test_cold_start_from_a_template_tenant_and_a_list(admin) -> None:
    admin.create_tenant("templates/support-bot")
    base = admin.write("templates/support-bot",
                       mem("Refunds are processed within 5 business days", type=pb.MEMORY_TYPE_PROCEDURAL, pinned=True),
                       mem("Support hours are 9-17 CET", key="hours"),
                       mem("Old policy: refunds take 10 days", confidence=0.2)).results   # pending: not copied
    write_one(admin, "templates/support-bot", "Support hours are 8-18 CET", key="hours")       # supersedes 9-17
    reply = admin.admin.CreateTenant(spb.CreateTenantRequest(
        tenant_id="acme/new-user", template_tenant_id="templates/support-bot",
        initial_memories=[mem("User's name is Kim")]), metadata=admin.metadata)
    assert reply.initial_memories == 3
    copied = {m.content: m for m in admin.list_all("acme/new-user")}
    assert set(copied) == {"Refunds are processed within 5 business days", "Support hours are 8-18 CET",
                           "User's name is Kim"}
    refund = copied["Refunds are processed within 5 business days"]
    assert refund.pinned and refund.type == pb.MEMORY_TYPE_PROCEDURAL and refund.memory_id != base[0].memory_id
    assert len(admin.list_all("templates/support-bot")) == 4                                # the template is unchanged
    missing = spb.CreateTenantRequest(tenant_id="acme/other", template_tenant_id="templates/nope")
    assert status_of(lambda: admin.admin.CreateTenant(missing, metadata=admin.metadata)) == grpc.StatusCode.NOT_FOUND
    assert "acme/other" not in admin.admin.ListTenants(spb.ListTenantsRequest(), metadata=admin.metadata).tenant_ids


def test_audit_log_traces_answers_to_memories_and_conversations(server, admin) -> None:
    t = "acme/audit"
    admin.create_tenant(t)
    first = write_one(admin, t, "User is allergic to peanuts", source_ref="conv-1#4")
    write_one(admin, t, "The user is allergic to peanuts.", source_ref="conv-2#9")            # merge
    v1 = write_one(admin, t, "Budget is 30k", key="budget", source_ref="conv-3#1")
    v2 = write_one(admin, t, "Budget is 50k", key="budget", source_ref="conv-4#2")             # supersede
    answer = admin.search(t, "does the user have allergies?", top_k=1)
    gone = write_one(admin, t, "A note to delete", source_ref="conv-5#1").memory_id
    admin.delete(t, gone)
    entries = audit(admin, t, page_size=2)                                                     # paginated
    ops = [e.op for e in entries]
    assert ops == [spb.AUDIT_OP_WRITE, spb.AUDIT_OP_MERGE, spb.AUDIT_OP_WRITE, spb.AUDIT_OP_WRITE,
                   spb.AUDIT_OP_SUPERSEDE, spb.AUDIT_OP_SEARCH, spb.AUDIT_OP_WRITE, spb.AUDIT_OP_DELETE]
    assert [e.entry_id for e in entries] == sorted(e.entry_id for e in entries)
    search = entries[5]
    assert search.query == "does the user have allergies?"
    assert [r.memory_id for r in search.refs] == ids_of(answer) == [first.memory_id]
    assert list(search.refs[0].source_refs) == ["conv-1#4", "conv-2#9"]        # the answer's conversations
    supersede = entries[4].refs[0]
    assert (supersede.memory_id, supersede.related_id, list(supersede.source_refs)) == (v1.memory_id, v2.memory_id,
                                                                                      ["conv-3#1"])
    assert all(e.key_id for e in entries) and all(e.at_ms > 0 for e in entries)
    about = audit(admin, t, memory_id=first.memory_id)
    assert [e.op for e in about] == [spb.AUDIT_OP_WRITE, spb.AUDIT_OP_MERGE, spb.AUDIT_OP_SEARCH]
    assert [e.op for e in audit(admin, t, ops=[spb.AUDIT_OP_DELETE])] == [spb.AUDIT_OP_DELETE]
    segments = sorted(server.app.engine.registry.directory(t).glob("audit-*.log"))
    assert segments and all(b"peanuts" not in p.read_bytes() for p in segments)   # no content
    assert status_of(lambda: admin.memory.Audit(spb.AuditRequest(tenant_id=t, page_token="bogus"),
                                                metadata=admin.metadata)) == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("op", ["history", "confirm", "forget", "audit"])
def test_new_rpcs_respect_tenant_keys(server, admin, op: str) -> None:
    admin.create_tenant("acme/x")
    admin.create_tenant("globex/y")
    mid = write_one(admin, "globex/y", "globex secret").memory_id
    acme = server.client(admin.create_key(prefixes=["acme/"]))
    calls = {"history": lambda: history(acme, "globex/y", mid), "confirm": lambda: acme.memory.Confirm(
        spb.ConfirmRequest(tenant_id="globex/y", memory_ids=[mid]), metadata=acme.metadata),
        "forget": lambda: forget(acme, "globex/y", all=True), "audit": lambda: audit(acme, "globex/y")}
    assert status_of(calls[op]) == grpc.StatusCode.PERMISSION_DENIED
    assert status_of(lambda: delete_tenant(acme, "acme/x")) == grpc.StatusCode.PERMISSION_DENIED   # admin only
    assert get_one(admin, "globex/y", mid).status == pb.MEMORY_STATUS_ACTIVE
