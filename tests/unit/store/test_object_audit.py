"""The audit log in the bucket (moto): it follows its tenant from owner to owner, a deposed owner's upload is
fenced, a commit whose owner died before its audit line gets one line at the takeover (and only one),
search lines wait for the flush, pages resume by entry id, retention and the cap keep the fences, and local
segments of an older version are moved into the bucket. A Write's line is carried by its commit: one PUT a
Write, recovered from the commit object when its owner died before the flush (the very line the flush would have
uploaded, key id and time included; an older commit object without them: noted "recovered"), never twice."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.domain import AuditOp, AuditRef
from server.errors import NotOwner
from server.store.audit import AuditLog, AuditPolicy, writing
from server.store.memory_store import TenantStore
from server.store.object_audit import BucketAuditLog
from server.store.object_wal import ObjectLogBackend
from server.store.s3 import ObjectStore
from tests.unit.store.s3_support import mocked, new_store
from tests.unit.store.test_compaction import DIM, memory, vec


@pytest.fixture()
def backend() -> Iterator[ObjectLogBackend]:
    with mocked():
        store, _ = new_store()
        yield ObjectLogBackend(store=store, owner_id="node-a", grace_s=0.0)


def open_tenant(backend: ObjectLogBackend, directory: Path, *, policy: AuditPolicy | None = None,
                tenant: str = "t1") -> tuple[TenantStore, BucketAuditLog]:
    store, _ = TenantStore.open(directory, dim=DIM, open_log=backend.opener(tenant))
    audit = (policy or AuditPolicy()).open(directory, log=store.durable_log)
    assert isinstance(audit, BucketAuditLog)
    return store, audit


def write(store: TenantStore, audit: BucketAuditLog, i: int, *, audited: bool = True, key_id: str = "k1",
          recorded: bool = True) -> None:
    """A Write as the engine makes it: the commit inside ``writing`` (``recorded=False``: a commit object of an
    older version, without its line's fields), then its line."""
    if recorded:
        with writing(key_id=key_id, at_ms=i):
            store.commit(puts=[(memory(i), vec(i))])
    else:
        store.commit(puts=[(memory(i), vec(i))])
    if audited:
        audit.append(AuditOp.WRITE, [AuditRef(memory_id=memory(i).memory_id)], at_ms=i, key_id=key_id)


def written(audit: BucketAuditLog) -> list[str]:
    entries, _ = audit.read(after=0, limit=10_000, ops=frozenset({AuditOp.WRITE}))
    return [r.memory_id for e in entries for r in e.refs]


def test_the_history_follows_the_tenant_and_a_deposed_owner_is_fenced(backend: ObjectLogBackend,
                                                                      tmp_path: Path) -> None:
    a_store, a = open_tenant(backend, tmp_path / "a")
    for i in range(3):
        write(a_store, a, i)
    b_store, b = open_tenant(backend, tmp_path / "b")     # another replica, nothing on its disk
    assert written(b) == [memory(i).memory_id for i in range(3)]
    write(b_store, b, 3)
    with pytest.raises(NotOwner):                        # a's next line meets b's fence
        a.append(AuditOp.DELETE, [AuditRef(memory_id="x")], at_ms=9)
    assert a.needs_reload and a_store.needs_reload
    _, c = open_tenant(backend, tmp_path / "c")
    assert written(c) == [memory(i).memory_id for i in range(4)]
    assert all(e.op != AuditOp.DELETE for e in c.read(after=0, limit=100)[0])


def test_a_commit_left_without_its_line_gets_exactly_one_at_the_takeover(backend: ObjectLogBackend,
                                                                         tmp_path: Path) -> None:
    a_store, a = open_tenant(backend, tmp_path / "a")
    write(a_store, a, 0)
    a.sync()                                             # the flush uploads the carried line
    write(a_store, a, 1, audited=False, key_id="k2")     # the owner died between the commit and its line
    _, b = open_tenant(backend, tmp_path / "b")
    assert written(b) == [memory(0).memory_id, memory(1).memory_id]
    entries, _ = b.read(after=0, limit=100)
    assert [(e.key_id, e.at_ms, e.note) for e in entries] == [("k1", 0, ""), ("k2", 1, "")]
    _, c = open_tenant(backend, tmp_path / "c")          # nothing recovered twice
    assert written(c) == [memory(0).memory_id, memory(1).memory_id]


def test_an_older_commit_object_without_its_line_is_recovered_as_before(backend: ObjectLogBackend,
                                                                        tmp_path: Path) -> None:
    """Commit objects already in buckets record no line fields: their line is recovered noted "recovered", at
    the commit's time, without a key id; a recorded commit after them gets its own line."""
    a_store, a = open_tenant(backend, tmp_path / "a")
    write(a_store, a, 0, recorded=False)                 # not carried: uploaded before the answer
    assert not a._pending
    write(a_store, a, 1, recorded=False, audited=False)  # the owner died between the commit and its line
    write(a_store, a, 2)                                 # carried; lost with the owner's buffer
    _, b = open_tenant(backend, tmp_path / "b")
    entries, _ = b.read(after=0, limit=100)
    assert [(e.refs[0].memory_id, e.key_id, e.note) for e in entries] == [
        (memory(0).memory_id, "k1", ""), (memory(1).memory_id, "", "recovered"), (memory(2).memory_id, "k1", "")]
    assert entries[1].at_ms > 10**12 and entries[2].at_ms == 2   # the commit object's time; the Write's own


def test_a_line_that_landed_is_not_recovered_again(backend: ObjectLogBackend, tmp_path: Path) -> None:
    a_store, a = open_tenant(backend, tmp_path / "a")
    for i in range(3):
        write(a_store, a, i)
    a_store.commit(puts=[], deletes=[memory(0).memory_id])
    a.append(AuditOp.DELETE, [AuditRef(memory_id=memory(0).memory_id)], at_ms=5)
    _, b = open_tenant(backend, tmp_path / "b")
    assert written(b) == [memory(i).memory_id for i in range(3)]
    assert len(b.read(after=0, limit=100, ops=frozenset({AuditOp.DELETE}))[0]) == 1


def test_search_lines_wait_for_the_flush_and_pages_resume(backend: ObjectLogBackend, tmp_path: Path) -> None:
    store, audit = open_tenant(backend, tmp_path / "a")
    before = len(backend.store.keys("tenants/t1/audit/"))
    for i in range(5):
        audit.append(AuditOp.SEARCH, [AuditRef(memory_id=f"m{i}")], at_ms=i, query=f"q{i}")
    assert len(backend.store.keys("tenants/t1/audit/")) == before     # buffered
    audit.sync()
    assert len(backend.store.keys("tenants/t1/audit/")) == before + 1  # one object for the five
    write(store, audit, 7)
    seen, token = [], 0
    while token >= 0:
        page, token = audit.read(after=token, limit=2)
        seen += page
    assert [e.query for e in seen] == ["q0", "q1", "q2", "q3", "q4", ""]
    assert len({e.entry_id for e in seen}) == 6


def test_retention_and_the_cap_keep_fences_and_the_newest(backend: ObjectLogBackend, tmp_path: Path) -> None:
    policy = AuditPolicy(max_bytes=1)
    a_store, a = open_tenant(backend, tmp_path / "a", policy=policy)
    for i in range(4):
        write(a_store, a, i)
        a.sync()                                         # one object a line
    _, b = open_tenant(backend, tmp_path / "b", policy=policy)
    assert b.maintain() == 4                             # a's four lines: the newest object is b's fence
    kinds = [o.fence for o in sorted(b._objects.values(), key=lambda o: o.seq)]
    assert kinds == [True, True]                         # a's lines went; both fences stay
    old = AuditPolicy(retention_s=3600.0)
    _, c = open_tenant(backend, tmp_path / "c", policy=old)
    c.append(AuditOp.WRITE, [AuditRef(memory_id="z")], at_ms=1)
    c.append(AuditOp.WRITE, [AuditRef(memory_id="y")], at_ms=2)
    c._clock = lambda: 1e12                              # far in the future: every line expired
    assert c.maintain() == 1                             # the older line's object; the newest stays
    assert written(c) == ["y"]


def test_local_segments_move_into_the_bucket_once(backend: ObjectLogBackend, tmp_path: Path) -> None:
    directory = tmp_path / "a"
    directory.mkdir()
    local = AuditLog(directory)
    local.append(AuditOp.WRITE, [AuditRef(memory_id="old")], at_ms=1)
    local.close()
    _, audit = open_tenant(backend, directory)
    assert written(audit) == ["old"]
    assert not list(directory.glob("audit-*.log"))
    _, again = open_tenant(backend, tmp_path / "b")
    assert written(again) == ["old"]


class CountedPuts:
    """Counts the conditional creates an ObjectStore makes (each is one PUT), by key prefix."""

    def __init__(self, store: ObjectStore) -> None:
        self.keys: list[str] = []
        self._create = store.create
        store.create = self._count  # type: ignore[method-assign]

    def _count(self, key: str, body: bytes) -> str:
        self.keys.append(key)
        return self._create(key, body)


def test_a_write_makes_one_put_and_its_line_reaches_the_log_with_the_flush(backend: ObjectLogBackend,
                                                                           tmp_path: Path) -> None:
    store, audit = open_tenant(backend, tmp_path / "a")
    puts = CountedPuts(backend.store)
    for i in range(3):
        with writing(key_id="k1", at_ms=100 + i):
            store.commit(puts=[(dataclasses.replace(memory(i), source_refs=(f"chat:{i}",)), vec(i))])
        audit.append(AuditOp.WRITE, [AuditRef(memory_id=memory(i).memory_id, source_refs=(f"chat:{i}",))],
                     at_ms=100 + i, key_id="k1")
    assert [k.split("/")[2] for k in puts.keys] == ["wal", "wal", "wal"]   # the commits alone
    store.commit(puts=[(memory(3), vec(3))])
    audit.append(AuditOp.WRITE, [AuditRef(memory_id=memory(3).memory_id)], at_ms=103, note="consolidation")
    assert [k.split("/")[2] for k in puts.keys[3:]] == ["wal", "audit"]    # not what the commit put: uploaded
    with writing(key_id="k1", at_ms=103):
        store.commit(puts=[(memory(5), vec(5))])
    audit.append(AuditOp.WRITE, [AuditRef(memory_id=memory(5).memory_id)], at_ms=103, key_id="k2")
    assert [k.split("/")[2] for k in puts.keys[5:]] == ["wal", "audit"]    # another key than recorded: uploaded
    entries, _ = audit.read(after=0, limit=100)
    assert [(e.refs[0].memory_id, e.at_ms, e.key_id, e.note) for e in entries] == [
        (memory(0).memory_id, 100, "k1", ""), (memory(1).memory_id, 101, "k1", ""),
        (memory(2).memory_id, 102, "k1", ""), (memory(3).memory_id, 103, "", "consolidation"),
        (memory(5).memory_id, 103, "k2", "")]
    assert entries[0].refs[0].source_refs == ("chat:0",)
    with writing(key_id="k1", at_ms=104):
        store.commit(puts=[(memory(4), vec(4))])
    audit.append(AuditOp.WRITE, [AuditRef(memory_id=memory(4).memory_id)], at_ms=104, key_id="k1")
    store.commit(updates=[memory(4, content="again")])                   # a merge: not in the commit, uploaded
    audit.append(AuditOp.MERGE, [AuditRef(memory_id=memory(4).memory_id)], at_ms=105)
    assert [k.split("/")[2] for k in puts.keys[7:]] == ["wal", "wal", "audit"]   # one object for both lines
    assert [e.op for e in audit.read(after=0, limit=100)[0][-2:]] == [AuditOp.WRITE, AuditOp.MERGE]
    store.commit(puts=[(memory(6), vec(6))])                             # committed outside writing(): uploaded
    audit.append(AuditOp.WRITE, [AuditRef(memory_id=memory(6).memory_id)], at_ms=106, key_id="k1")
    assert [k.split("/")[2] for k in puts.keys[10:]] == ["wal", "audit"]


def test_a_carried_line_is_recovered_from_its_commit_once(backend: ObjectLogBackend, tmp_path: Path) -> None:
    a_store, a = open_tenant(backend, tmp_path / "a")
    write(a_store, a, 0)
    a.sync()
    for i in (1, 2):
        write(a_store, a, i)                             # carried; the owner dies before the flush
    a_store.commit(puts=[(memory(0, content="re-indexed"), vec(0))])   # a put again of a known memory
    buffered = list(a._pending)                          # the lines the flush would have uploaded
    _, b = open_tenant(backend, tmp_path / "b")
    assert b.lines()[1:] == [json.loads(raw) for raw in buffered]   # the very lines, key id and time too
    entries, _ = b.read(after=0, limit=100)
    assert [(e.refs[0].memory_id, e.at_ms, e.key_id, e.note) for e in entries] == [
        (memory(i).memory_id, i, "k1", "") for i in range(3)]
    with pytest.raises(NotOwner):                        # a's late flush meets b's fence: nothing twice
        a._upload_through(a._appended)
    _, c = open_tenant(backend, tmp_path / "c")
    assert written(c) == [memory(i).memory_id for i in range(3)]


def test_a_flushed_carried_line_is_not_recovered_again(backend: ObjectLogBackend, tmp_path: Path) -> None:
    a_store, a = open_tenant(backend, tmp_path / "a")
    for i in range(3):
        write(a_store, a, i)
    a.sync()                                             # then the owner dies
    _, b = open_tenant(backend, tmp_path / "b")
    entries, _ = b.read(after=0, limit=100)
    assert [(e.refs[0].memory_id, e.at_ms, e.note) for e in entries] == [(memory(i).memory_id, i, "") for i in range(3)]


def test_a_compaction_uploads_the_carried_lines_it_folds_into_its_base(backend: ObjectLogBackend,
                                                                       tmp_path: Path) -> None:
    a_store, a = open_tenant(backend, tmp_path / "a")
    for i in range(3):
        write(a_store, a, i)
    a_store.compact()                                    # the commits are now in a base, not segments
    write(a_store, a, 3)                                 # a line of a commit after the base stays carried
    assert len(a._pending) == 1
    _, b = open_tenant(backend, tmp_path / "b")          # a died: 3's line is recovered from its segment
    entries, _ = b.read(after=0, limit=100)
    assert [(e.refs[0].memory_id, e.key_id, e.note) for e in entries] == [
        (memory(i).memory_id, "k1", "") for i in range(4)]
