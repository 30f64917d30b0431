"""TenantStore on the object-storage log (moto): a fresh process with an empty data dir rebuilds the tenant
from the bucket, a deposed owner's commit is refused and changes nothing, compaction (racing commits)
leaves the same state as no compaction, and an unknown outcome is settled by the reload."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.errors import NotOwner, StoreUnavailable
from server.store.memory_store import TenantStore
from server.store.object_wal import ObjectLogBackend
from tests.unit.store.s3_support import Faults, mocked, new_store
from tests.unit.store.test_compaction import DIM, churn, memory, state, vec


@pytest.fixture()
def backend() -> Iterator[tuple[ObjectLogBackend, Faults]]:
    with mocked():
        store, faults = new_store()
        yield ObjectLogBackend(store=store, owner_id="node-a", grace_s=0.0), faults


def open_store(backend: ObjectLogBackend, directory: Path, tenant: str = "t1") -> TenantStore:
    store, _ = TenantStore.open(directory, dim=DIM, open_log=backend.opener(tenant))
    return store


def vectors_of(store: TenantStore) -> dict[int, bytes]:
    """The last logged vector of each live doc, read back through the store's log (its local cache)."""
    blobs = {int(meta["m"]["doc"]): blob for meta, blob in store._wal.read() if meta.get("op") == "put" and blob}
    return {d: b for d, b in blobs.items() if store.by_doc(d) is not None}


def test_an_empty_data_dir_rebuilds_the_tenant_from_the_bucket(backend: tuple[ObjectLogBackend, Faults],
                                                              tmp_path: Path) -> None:
    objects, _ = backend
    first = open_store(objects, tmp_path / "a")
    churn(first, 30, rounds=3)
    expected = state(first)
    again = open_store(objects, tmp_path / "b")      # another process, nothing on its disk
    assert state(again) == expected
    assert vectors_of(again) == vectors_of(first)
    with pytest.raises(NotOwner):                    # the first one was deposed by that open
        first.commit(puts=[(memory(999), vec(999))])
    assert first.get("m_000999") is None and state(first) == expected
    again.commit(puts=[(memory(999), vec(999))])
    assert open_store(objects, tmp_path / "c").get("m_000999") == memory(999)


def test_compaction_racing_commits_equals_no_compaction(backend: tuple[ObjectLogBackend, Faults],
                                                        tmp_path: Path) -> None:
    objects, _ = backend
    compacted = open_store(objects, tmp_path / "s3", tenant="compacted")
    plain, _ = TenantStore.open(tmp_path / "local", dim=DIM)
    for store in (compacted, plain):
        churn(store, 40, rounds=5)
    plan = compacted.begin_compaction()
    assert plan is not None
    for store in (compacted, plain):   # commits between the plan and the swap: the tail
        store.commit(puts=[(memory(1000), vec(1000))], deletes=["m_000001"])
        store.commit(accesses=[dataclasses.replace(store.get("m_000003"), access_count=99)])  # type: ignore[arg-type]
    before = compacted.log_bytes
    assert compacted.run_compaction(plan) < before
    for store in (compacted, plain):
        store.commit(puts=[(memory(1001), vec(1001))])
    expected = state(plain)
    assert state(compacted) == expected
    reloaded = open_store(objects, tmp_path / "fresh", tenant="compacted")   # base + tail from the bucket
    assert state(reloaded) == expected and vectors_of(reloaded) == vectors_of(plain)
    assert reloaded._wal.compacted_seq == plan.seq    # type: ignore[attr-defined]  (index caches older: rebuild)
    plan = reloaded.begin_compaction()   # a second compaction on the reloaded cache
    assert plan is not None
    reloaded.run_compaction(plan)
    assert state(open_store(objects, tmp_path / "fresh2", tenant="compacted")) == expected


def test_a_lost_answer_commits_once(backend: tuple[ObjectLogBackend, Faults], tmp_path: Path) -> None:
    objects, faults = backend
    store = open_store(objects, tmp_path / "a")
    faults.lost = 1
    store.commit(puts=[(memory(1), vec(1))])
    assert faults.puts_landed >= 2    # the fence, the commit (its retry met 412 and found its own bytes)
    store.commit(puts=[(memory(2), vec(2))])
    records = [r for r in open_store(objects, tmp_path / "b")._wal.read() if r[0].get("op") == "put"]
    assert [r[0]["m"]["id"] for r in records] == ["m_000001", "m_000002"]


def test_an_unknown_outcome_refuses_further_commits_until_a_reload_settles_it(
        backend: tuple[ObjectLogBackend, Faults], tmp_path: Path) -> None:
    objects, faults = backend
    store = open_store(objects, tmp_path / "a")
    store.commit(puts=[(memory(1), vec(1))])
    faults.lost, faults.dark = 1, True    # the commit lands, then the endpoint goes dark
    with pytest.raises(StoreUnavailable) as exc:
        store.commit(puts=[(memory(2), vec(2))])
    assert exc.value.outcome_unknown and store.get("m_000002") is None
    faults.lost, faults.dark = 0, False
    with pytest.raises(StoreUnavailable, match="reloaded"):
        store.commit(puts=[(memory(3), vec(3))])
    store.close()
    again = open_store(objects, tmp_path / "a")           # the reload: replay says it landed
    assert [m.memory_id for m in sorted(again.all(), key=lambda m: m.doc_id)] == ["m_000001", "m_000002"]
    again.commit(puts=[(memory(3), vec(3))])
    assert len(open_store(objects, tmp_path / "b")) == 3


def test_a_refused_connection_fails_cleanly_and_a_reload_lets_the_next_commit_through(
        backend: tuple[ObjectLogBackend, Faults], tmp_path: Path) -> None:
    """Even a refused connection counts as an unknown outcome (a killed SeaweedFS once kept a segment whose
    create had failed that way): nothing is applied, the log needs a reload, and the reload settles it."""
    objects, faults = backend
    store = open_store(objects, tmp_path / "a")
    faults.refused = 10
    with pytest.raises(StoreUnavailable) as exc:
        store.commit(puts=[(memory(1), vec(1))])
    assert exc.value.outcome_unknown and len(store) == 0 and store.needs_reload
    faults.refused = 0
    with pytest.raises(StoreUnavailable):   # refused until reloaded
        store.commit(puts=[(memory(2), vec(2))])
    store.close()
    store = open_store(objects, tmp_path / "a")
    assert not store.needs_reload
    store.commit(puts=[(memory(3), vec(3))])
    assert [m.memory_id for m in open_store(objects, tmp_path / "b").all()] == ["m_000003"]



def test_compactions_on_another_thread_while_commits_stream(backend: tuple[ObjectLogBackend, Faults],
                                                            tmp_path: Path) -> None:
    objects, _ = backend
    store = open_store(objects, tmp_path / "a")
    store.commit(puts=[(memory(i), vec(i)) for i in range(1, 21)])
    done = threading.Event()

    def writer() -> None:
        for i in range(21, 61):
            if i in (35, 50):   # commits go on only once a compaction finished beside them (not left to timing)
                deadline = time.monotonic() + 30
                while store.compactions < (1 if i == 35 else 2) and time.monotonic() < deadline:
                    time.sleep(0.005)
            store.commit(puts=[(memory(i), vec(i))], deletes=[f"m_{i - 20:06d}"] if i % 3 == 0 else [])
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set():   # as the shard's compaction thread: the plan at an instant, the rest beside commits
        plan = store.begin_compaction()
        if plan is not None:
            store.run_compaction(plan)
    thread.join()
    expected = state(store)
    assert len(expected) == 60 - len(range(21, 61, 3)) and store.compactions >= 2
    assert state(open_store(objects, tmp_path / "b")) == expected


def test_a_dropped_tenant_leaves_nothing_in_the_bucket(backend: tuple[ObjectLogBackend, Faults], tmp_path: Path) -> None:
    objects, _ = backend
    store = open_store(objects, tmp_path / "a", tenant="gone")
    churn(store, 10, rounds=1)
    plan = store.begin_compaction()
    assert plan is not None
    store.run_compaction(plan)
    store.close()
    kept = open_store(objects, tmp_path / "k", tenant="kept")
    kept.commit(puts=[(memory(1), vec(1))])
    assert objects.drop_tenant("gone") == 4   # owner, manifest, base, fence (grace 0: the commits went already)
    assert objects.store.keys("tenants/gone/") == []
    assert len(open_store(objects, tmp_path / "b", tenant="gone")) == 0
    assert len(open_store(objects, tmp_path / "k2", tenant="kept")) == 1


def test_a_compacted_object_log_has_no_base_record_an_older_replica_could_not_read(
        backend: tuple[ObjectLogBackend, Faults], tmp_path: Path) -> None:
    objects, _ = backend
    store = open_store(objects, tmp_path / "a")
    churn(store, 30, rounds=3)
    store.compact()
    expected = state(store)
    again = open_store(objects, tmp_path / "b")   # replays the base from the bucket
    assert state(again) == expected
    assert again.compacted_seq > 0                # where the object log keeps its base's seq
    assert all(meta.get("op") != "base" for meta, _ in again._wal.read())
    local, _ = TenantStore.open(tmp_path / "local", dim=DIM)   # the local file keeps no seq of its own: it does
    churn(local, 30, rounds=3)
    local.compact()
    assert [meta.get("op") for meta, _ in local._wal.read()][0] == "base"
    assert TenantStore.open(tmp_path / "local", dim=DIM)[0].history_from == local.base_seq > 0


def test_the_cache_is_not_fsynced_and_a_cache_cut_short_is_rebuilt_from_the_bucket(
        backend: tuple[ObjectLogBackend, Faults], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    objects, _ = backend
    first = open_store(objects, tmp_path / "a")
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr("server.store.wal.os.fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    for i in range(5):
        first.commit(puts=[(memory(i), vec(i))])   # acknowledged once the bucket has each commit
    assert synced == []                             # the bucket is the source of truth: no fsync of the cache
    monkeypatch.undo()
    expected = state(first)
    cache = first._wal.path
    first.close()
    with open(cache, "r+b") as f:                   # what a machine crash may leave of unsynced appends
        f.truncate(cache.stat().st_size // 2)
    again = open_store(objects, tmp_path / "a")
    assert state(again) == expected and sorted(vectors_of(again)) == sorted(vectors_of(first))


def test_an_append_only_tenant_is_compacted_by_its_segment_count(backend: tuple[ObjectLogBackend, Faults],
                                                                  tmp_path: Path) -> None:
    """The byte rule never fires on a log of puts alone (all of it is live), yet a takeover reads every segment past
    the base with one GET each: the segment rule compacts it, and a later owner reads the base and a short tail."""
    objects, _ = backend
    segmented = dataclasses.replace(objects, compact_segments=8)
    store = open_store(segmented, tmp_path / "a")
    for i in range(1, 7):      # the takeover's fence is segment 1, then 6 commits: 7 segments past the base
        store.commit(puts=[(memory(i), vec(i))])
        assert not store.compaction_due(ratio=2.0, min_bytes=4 << 20)   # below the floor
    assert store._wal.objects.segments_past_base == 7
    store.commit(puts=[(memory(7), vec(7))])
    assert store.compaction_due(ratio=2.0, min_bytes=4 << 20)       # 8: due, though every byte is live
    plain = open_store(objects, tmp_path / "plain", tenant="plain")   # the default floor, 256: not yet
    for i in range(1, 20):
        plain.commit(puts=[(memory(i), vec(i))])
    assert not plain.compaction_due(ratio=2.0, min_bytes=4 << 20)
    store.compact()
    assert not store.compaction_due(ratio=2.0, min_bytes=4 << 20)
    expected = state(store)
    store._wal.objects.collect()    # grace 0: the segments the base stands for go now (the fences stay)
    again = open_store(segmented, tmp_path / "b")
    assert state(again) == expected and vectors_of(again) == vectors_of(store)
    assert again._wal.objects.segments_past_base <= 2   # the tail the new owner read: the last fence (and its own)


def test_the_segment_rule_scales_with_the_live_bytes() -> None:
    from server.store.object_wal import SEGMENT_BASE_BYTES, segments_due

    assert not segments_due(10_000, 0, 0)                       # 0: off
    assert segments_due(256, 0, 256) and not segments_due(255, 0, 256)
    big = 1000 * SEGMENT_BASE_BYTES                             # a base of 1000 segments' worth: 1000 needed
    assert not segments_due(999, big, 256) and segments_due(1000, big, 256)
