"""The idempotency table: its window (age, count, bytes), the fingerprint, and its life in the store's log —
committed in the change's group, rebuilt by replay, kept by compaction while inside the window."""

from __future__ import annotations

import gc
import hashlib
import json
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from server.domain import Filter, ForgetSpec, MemoryInput, MemoryStatus, MemoryType
from server.store.idempotency import MAX_ENTRIES, Done, IdempotencyTable, _plain, fingerprint
from server.store.memory_store import LOG_FILE, TenantStore
from server.store.wal import read_records
from tests.unit.store.test_compaction import DIM, memory, vec

HOUR_MS = 3600 * 1000


def done(key: str, at_ms: int, *, kind: str = "write", fp: str = "f" * 32, answer: object = None) -> Done:
    return Done(kind=kind, key=key, fingerprint=fp, at_ms=at_ms,
                answer=[["m_" + "0" * 20, 1, 1, "", [], 0.5]] if answer is None else answer)


def test_window_by_age_count_and_bytes() -> None:
    table = IdempotencyTable(window_ms=HOUR_MS, max_entries=3, max_bytes=10_000)
    table.add(done("a", 0))
    table.add(done("b", 10))
    assert table.get("write", "a", now_ms=20) is not None
    assert table.get("delete", "a", now_ms=20) is None          # per call kind
    assert table.get("write", "a", now_ms=HOUR_MS + 1) is None  # past its window at that time
    table.add(done("c", 20))
    table.add(done("d", 30))                                    # a fourth: the oldest goes
    assert [d.key for d in table.live()] == ["b", "c", "d"]
    table.add(done("e", HOUR_MS + 15))                          # b is now older than the window
    assert [d.key for d in table.live()] == ["c", "d", "e"]
    # a lookup is never answered by an entry the newest one already put out of the window
    assert table.get("write", "c", now_ms=0) is not None
    table.add(done("f", 2 * HOUR_MS + 10))
    assert table.get("write", "c", now_ms=0) is None and table.get("write", "e", now_ms=0) is not None

    small = IdempotencyTable(window_ms=HOUR_MS, max_entries=100, max_bytes=1000)
    for i in range(20):
        small.add(done(f"k{i}", i))
    assert small.encoded_bytes <= 1000 and 0 < len(small) < 20
    assert small.live()[-1].key == "k19"


def test_the_same_key_again_after_its_window_is_a_new_entry() -> None:
    table = IdempotencyTable(window_ms=100, max_entries=10)
    table.add(done("a", 0, fp="1" * 32))
    table.add(done("b", 500))
    table.add(done("a", 600, fp="2" * 32))
    assert [d.key for d in table.live()] == ["b", "a"] and len(table) == 2
    assert table.get("write", "a", now_ms=600).fingerprint == "2" * 32  # type: ignore[union-attr]
    assert table.encoded_bytes == sum(d.encoded_bytes() for d in table.live())


def test_fingerprint_is_of_the_request_body() -> None:
    a = [MemoryInput(content="x", metadata={"a": "1", "b": "2"}, entities=("e",))]
    same = [MemoryInput(content="x", metadata={"b": "2", "a": "1"}, entities=("e",))]
    assert fingerprint("write", a) == fingerprint("write", same)
    assert fingerprint("write", a) != fingerprint("write", [MemoryInput(content="y")])
    assert fingerprint("write", a) != fingerprint("confirm", a)
    assert fingerprint("write", [MemoryInput(content="x", importance=None)]) != \
        fingerprint("write", [MemoryInput(content="x", importance=0.5)])
    f1 = ForgetSpec(filter=Filter(types=frozenset({MemoryType.EPISODIC, MemoryType.SEMANTIC})))
    f2 = ForgetSpec(filter=Filter(types=frozenset({MemoryType.SEMANTIC, MemoryType.EPISODIC})))
    assert fingerprint("forget", f1) == fingerprint("forget", f2)
    assert fingerprint("forget", f1) != fingerprint("forget", ForgetSpec(filter=Filter(), all=True))


# Requests and the fingerprints the server recorded for them before the fingerprint was built by the C encoder (a
# Python walk of every field, then json.dumps): a record in the log is compared with a retry that may reach a server
# of another version, so these values never change.
RECORDED = {
    "write": ([MemoryInput(content="Alice moved to Lisbon in May", type=MemoryType.EPISODIC, entities=("Alice",),
                           metadata={"b": "2", "a": "1"}, importance=0.5),
               MemoryInput(content="你好 naïve", created_at_ms=1_700_000_000_000, supersedes=("m_1",))],
              "2de35136701d7a959d4f86100e016420"),
    "delete": (["m_a", "m_b"], "d423764e35c56d1f35bf1957a6dbe062"),
    "forget": (ForgetSpec(filter=Filter(types=frozenset({MemoryType.EPISODIC, MemoryType.SEMANTIC}))),
               "f1e36979aec2494ec5d23ab8ee19b4b3"),
}


@pytest.mark.parametrize("kind", sorted(RECORDED))
def test_a_fingerprint_is_what_earlier_versions_recorded(kind: str) -> None:
    body, recorded = RECORDED[kind]
    assert fingerprint(kind, body) == recorded


def walked(kind: str, body: object) -> str:
    """The fingerprint as it was computed before: a plain copy of every field, then its JSON."""
    text = json.dumps([kind, _plain(body)], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def test_the_encoder_hashes_every_body_as_the_walk_did() -> None:
    rng = random.Random(5)
    words = ["budget", "Lisbon", "周末", "naïve", "", "a\"b", "x\ny", "🙂"]
    for _ in range(200):
        memories = [MemoryInput(
            content=" ".join(rng.choices(words, k=rng.randint(1, 6))), type=rng.choice(list(MemoryType)),
            importance=rng.choice([None, 0.0, 0.25, 1.0]), created_at_ms=rng.choice([0, 1_700_000_000_123]),
            entities=tuple(rng.sample(words, rng.randint(0, 3))), confidence=rng.choice([None, 0.4, 1.0]),
            metadata={rng.choice(words): rng.choice(words) for _ in range(rng.randint(0, 3))},
            supersedes=tuple(f"m_{rng.randint(0, 9)}" for _ in range(rng.randint(0, 2))), pinned=rng.random() < 0.3,
            salience=rng.random(), source_refs=tuple(rng.sample(words, rng.randint(0, 2))))
            for _ in range(rng.randint(0, 4))]
        assert fingerprint("write", memories) == walked("write", memories)
        spec = ForgetSpec(filter=Filter(types=frozenset(rng.sample(list(MemoryType), rng.randint(0, 3))),
                                        entities_any=frozenset(rng.sample(words, rng.randint(0, 3))),
                                        scope=rng.choice([None, "", "work"]), min_importance=rng.choice([None, 0.5])),
                          all=rng.random() < 0.5)
        assert fingerprint("forget", spec) == walked("forget", spec)
        ids = [f"m_{rng.randint(0, 99)}" for _ in range(rng.randint(0, 5))]
        assert fingerprint("confirm", ids) == walked("confirm", ids)


def test_the_answer_is_in_the_changes_group_and_replay_rebuilds_the_table(tmp_path: Path) -> None:
    store, _ = TenantStore.open(tmp_path, dim=DIM)
    seq = store.commit(puts=[(memory(1), vec(1))], done=done("k1", 1000))
    store.commit(done=done("k2", 2000, kind="delete", answer=[0, ["m_x"]]))   # a call that changed nothing
    groups = [(meta["op"], meta["seq"]) for meta, _ in read_records(tmp_path / LOG_FILE)]
    assert groups == [("put", seq), ("idem", seq), ("idem", seq + 1)]
    store.close()
    again, _ = TenantStore.open(tmp_path, dim=DIM)
    assert again.get("m_000001") is not None
    assert again.idempotency.get("write", "k1", now_ms=1000) == done("k1", 1000)
    assert again.idempotency.get("delete", "k2", now_ms=2000).answer == [0, ["m_x"]]  # type: ignore[union-attr]
    assert again.seq == seq + 1
    again.close()


def test_a_failed_append_records_no_answer(tmp_path: Path) -> None:
    store, _ = TenantStore.open(tmp_path, dim=DIM)
    with pytest.raises(ValueError):   # a bad vector: the group is refused before anything is logged
        store.commit(puts=[(memory(1), np.zeros(DIM + 1, dtype=np.float32))], done=done("k", 1))
    assert store.idempotency.get("write", "k", now_ms=1) is None
    store.close()


def test_compaction_keeps_the_keys_inside_the_window(tmp_path: Path) -> None:
    store, _ = TenantStore.open(tmp_path, dim=DIM)
    store.idempotency = IdempotencyTable(window_ms=HOUR_MS, max_entries=MAX_ENTRIES)
    store.commit(puts=[(memory(1), vec(1))], done=done("old", 0))
    store.commit(puts=[(memory(2), vec(2))], done=done("kept", HOUR_MS // 2))
    store.commit(deletes=["m_000001"], done=done("newest", HOUR_MS + 10, kind="delete", answer=[1, []]))
    assert {d.key for d in store.idempotency.live()} == {"kept", "newest"}   # "old" left the window
    plan = store.begin_compaction()
    assert plan is not None
    store.commit(puts=[(memory(3), vec(3))], done=done("during", HOUR_MS + 20))   # committed meanwhile: the tail
    store.run_compaction(plan)
    ops = [meta["op"] for meta, _ in read_records(tmp_path / LOG_FILE)]
    assert ops.count("idem") == 3 and ops.count("put") == 2
    store.close()
    again, _ = TenantStore.open(tmp_path, dim=DIM)
    assert [d.key for d in again.idempotency.live()] == ["kept", "newest", "during"]
    assert again.idempotency.get("write", "old", now_ms=HOUR_MS + 20) is None
    assert again.idempotency.get("delete", "newest", now_ms=HOUR_MS + 20).answer == [1, []]  # type: ignore[union-attr]
    assert sorted(m.memory_id for m in again.all()) == ["m_000002", "m_000003"]
    again.close()


def test_live_bytes_count_the_kept_answers(tmp_path: Path) -> None:
    store, _ = TenantStore.open(tmp_path, dim=DIM)
    store.commit(puts=[(memory(1), vec(1))])
    before = store.live_bytes_estimate
    store.commit(done=done("k", 1))
    assert store.live_bytes_estimate - before == done("k", 1).encoded_bytes() > 100
    store.close()


def test_bytes_per_entry_fit_the_window(capsys: pytest.CaptureFixture[str]) -> None:
    """The measurement behind MAX_ENTRIES (server/store/idempotency.py): a one-memory Write's entry."""
    n = 5000
    gc.collect()
    tracemalloc.start()
    table = IdempotencyTable(max_entries=n)
    base = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        # as a Write records it: the results as decoded JSON, a uuid4 hex key, a 32-hex fingerprint
        table.add(Done(kind="write", key=f"{i:032x}", fingerprint=f"{i:032x}",
                       answer=[[f"m_{i:020x}", 1, int(MemoryStatus.ACTIVE), "", [], 0.4321]], at_ms=1_700_000_000_000 + i))
    heap = (tracemalloc.get_traced_memory()[0] - base) / n
    tracemalloc.stop()
    log_bytes = table.encoded_bytes / n
    with capsys.disabled():
        print(f"\nidempotency entry: {log_bytes:.0f} log bytes, {heap:.0f} heap bytes")
    assert 150 < log_bytes < 300 and heap < 2000


def test_a_takeover_replays_the_answers_from_object_storage(tmp_path: Path) -> None:
    """Another replica takes the tenant over (an empty data dir, the bucket's log): the answers come with it,
    through its compaction too; an unknown outcome (the segment landed, its answer was lost) is settled by the
    reload that follows it — the answer is there exactly when the change is."""
    from server.errors import StoreUnavailable
    from server.store.object_wal import ObjectLogBackend
    from tests.unit.store.s3_support import mocked, new_store

    with mocked():
        bucket, faults = new_store()
        backend = ObjectLogBackend(store=bucket, owner_id="node-a", grace_s=0.0)
        first, _ = TenantStore.open(tmp_path / "a", dim=DIM, open_log=backend.opener("t1"))
        first.commit(puts=[(memory(1), vec(1))], done=done("k1", 1000))
        faults.lost, faults.dark = 1, True   # this commit lands, then the endpoint goes dark
        with pytest.raises(StoreUnavailable):
            first.commit(puts=[(memory(2), vec(2))], done=done("k2", 2000))
        assert first.idempotency.get("write", "k2", now_ms=2000) is None   # unknown here ...
        faults.lost, faults.dark = 0, False
        second, _ = TenantStore.open(tmp_path / "b", dim=DIM, open_log=backend.opener("t1"))
        assert second.get("m_000002") is not None                          # ... landed: answer and change
        assert [d.key for d in second.idempotency.live()] == ["k1", "k2"]
        second.commit(deletes=["m_000001"], done=done("k3", 3000, kind="delete", answer=[1, []]))
        assert second.compact() > 0
        third, _ = TenantStore.open(tmp_path / "c", dim=DIM, open_log=backend.opener("t1"))
        assert [d.key for d in third.idempotency.live()] == ["k1", "k2", "k3"]
        assert third.idempotency.get("write", "k1", now_ms=3000) == done("k1", 1000)
        for store in (first, second, third):
            store.close()
