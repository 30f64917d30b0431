"""Dense snapshots of a tenant shard: round trip, catch-up from the log, stale and corrupt snapshots."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from server.config import MemoryConfig
from server.domain import MemoryInput
from server.engine.write import commit_writes
from server.index.tiers import TierRules
from server.tenants.shard import DENSE_SNAPSHOT, TenantShard

DIM = 16
RULES = TierRules(promote_at=500, codes="Flat", nprobe=16, ef_search=32)
CFG = MemoryConfig(dedupe_cosine=1.01)


def vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def builder():
    pool = ThreadPoolExecutor(1)
    yield pool
    pool.shutdown(wait=True)


def load(directory: Path, builder: ThreadPoolExecutor) -> TenantShard:
    return TenantShard.load("t", directory, dim=DIM, rules=RULES, builder=builder)


def write(shard: TenantShard, texts: list[str], vecs: np.ndarray) -> list[str]:
    with shard.write_lock:
        results = commit_writes(shard, [MemoryInput(content=t) for t in texts], vecs, cfg=CFG, now_ms=1_700_000_000_000)
    return [r.memory_id for r in results]


def delete(shard: TenantShard, ids: list[str]) -> None:
    with shard.write_lock:
        shard.apply(deletes=ids)


def crash(shard: TenantShard) -> None:
    """Closes files without the close-time flush and snapshot, like a killed process."""
    shard.dense.close()
    shard.lexical.close()
    shard.store.close()


def top_docs(shard: TenantShard, queries: np.ndarray) -> set[int]:
    _, ids = shard.dense.search(queries, 5)
    return set(ids.ravel().tolist()) - {-1}


def live_docs(shard: TenantShard) -> set[int]:
    return {m.doc_id for m in shard.store.all()}


def test_snapshot_round_trip_and_catch_up_from_the_log(tmp_path: Path, jvm: None, builder) -> None:  # type: ignore[no-untyped-def]
    vecs = vectors(800, seed=0)
    shard = load(tmp_path, builder)
    ids = write(shard, [f"memory {i}" for i in range(600)], vecs[:600])
    shard.wait_built(60)
    assert shard.dense.tier == "ivf" and (tmp_path / DENSE_SNAPSHOT).exists()   # written after the swap
    # Changes after the snapshot live only in the log until the next snapshot.
    write(shard, [f"memory {i}" for i in range(600, 800)], vecs[600:])
    delete(shard, ids[:50])
    expected = live_docs(shard)
    crash(shard)

    again = load(tmp_path, builder)
    try:
        assert again.dense.tier == "ivf" and not again.dense.building     # not re-trained
        assert len(again.dense) == len(expected) == 750
        ids_arr, _ = again.dense.export()
        assert set(ids_arr.tolist()) == expected
        assert not top_docs(again, vecs[:50]) - expected
    finally:
        again.close()
    # close() wrote a fresh snapshot: the next load replays nothing and matches.
    third = load(tmp_path, builder)
    try:
        assert third.dense.tier == "ivf" and set(third.dense.export()[0].tolist()) == expected
    finally:
        third.close()


def test_stale_snapshot_is_rebuilt_from_the_store(tmp_path: Path, jvm: None, builder) -> None:  # type: ignore[no-untyped-def]
    vecs = vectors(700, seed=1)
    shard = load(tmp_path, builder)
    write(shard, [f"memory {i}" for i in range(520)], vecs[:520])
    shard.wait_built(60)
    shard.close()
    early_log = tmp_path / "early.wal"
    shutil.copy(tmp_path / "memories.wal", early_log)
    shard = load(tmp_path, builder)
    write(shard, [f"memory {i}" for i in range(520, 700)], vecs[520:])
    shard.close()                                   # snapshot now at a later seq than the early log
    shutil.copy(early_log, tmp_path / "memories.wal")
    shutil.rmtree(tmp_path / "lucene")

    again = load(tmp_path, builder)
    try:
        assert len(again.store) == 520
        assert set(again.dense.export()[0].tolist()) == live_docs(again)   # nothing from the future
        again.wait_built(60)                                          # re-promoted in the background
        assert again.dense.tier == "ivf" and set(again.dense.export()[0].tolist()) == live_docs(again)
    finally:
        again.close()


def test_corrupt_snapshot_is_rebuilt(tmp_path: Path, jvm: None, builder) -> None:  # type: ignore[no-untyped-def]
    vecs = vectors(520, seed=2)
    shard = load(tmp_path, builder)
    write(shard, [f"memory {i}" for i in range(520)], vecs)
    shard.wait_built(60)
    shard.close()
    snap = tmp_path / DENSE_SNAPSHOT
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snap.write_bytes(bytes(data))
    again = load(tmp_path, builder)
    try:
        assert again.dense.tier == "flat" or again.dense.building or again.dense.builds == 1
        again.wait_built(60)
        assert set(again.dense.export()[0].tolist()) == live_docs(again)
    finally:
        again.close()
