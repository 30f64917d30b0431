"""Passage vectors survive what a memory's main vector survives: a crash (replay of the log), a compaction, an IVF
snapshot caught up with the log; a delete removes them everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from server.config import MemoryConfig
from server.domain import MemoryInput
from server.engine.write import commit_writes
from server.index.memory_vectors import DOC_MASK, passage_ids
from server.tenants.shard import DENSE_SNAPSHOT, TenantShard
from tests.unit.tenants.test_shard_snapshot import builder, crash, load
from tests.unit.tenants.test_shard_snapshot import vectors as unit

__all__ = ["builder"]   # the fixture, used by name
CFG = MemoryConfig(dedupe_cosine=1.01)


def write(shard: TenantShard, sets: list[np.ndarray], start: int = 0) -> list[str]:
    inputs = [MemoryInput(content=f"memory {start + i}") for i in range(len(sets))]
    with shard.write_lock:
        return [r.memory_id for r in commit_writes(shard, inputs, sets, cfg=CFG, now_ms=1_700_000_000_000)]


def found(shard: TenantShard, queries: np.ndarray) -> list[int]:
    _, ids = shard.dense.search(queries, 1)
    return ids[:, 0].tolist()


def long_sets(mains: np.ndarray, deep: np.ndarray, every: int) -> list[np.ndarray]:
    """Every ``every``-th memory carries two passages (deep rows 2i, 2i+1), the rest one vector."""
    return [np.vstack([m, deep[2 * i], deep[2 * i + 1]]) if i % every == 0 else m for i, m in enumerate(mains)]


def test_passages_survive_a_crash_and_a_compaction_and_go_with_a_delete(tmp_path: Path, jvm: None,
                                                                        builder) -> None:  # type: ignore[no-untyped-def]
    mains, deep = unit(30, seed=1), unit(60, seed=2)
    shard = load(tmp_path, builder)
    ids = write(shard, long_sets(mains, deep, every=3))
    docs = {m.memory_id: m.doc_id for m in shard.store.all()}
    targets = deep[[2 * i + 1 for i in range(0, 30, 3)]]
    expected = [docs[ids[i]] for i in range(0, 30, 3)]
    assert found(shard, targets) == expected and shard.dense.passage_vectors == 20
    ids_x, _ = shard.store.exact_vectors()
    assert set(passage_ids(docs[ids[0]], 2).tolist()) <= set(ids_x.tolist())
    crash(shard)

    again = load(tmp_path, builder)
    assert found(again, targets) == expected and len(again.dense) == 50
    with again.write_lock:
        again.apply(deletes=[ids[0]])
        again.store.compact()
    crash(again)

    third = load(tmp_path, builder)
    try:
        assert len(third.dense) == 47 and third.dense.passage_vectors == 18
        assert found(third, targets[1:]) == expected[1:]
        _, hits = third.dense.search(deep[:2], 29)
        assert docs[ids[0]] not in set(hits.ravel().tolist()) and (hits <= DOC_MASK).all()
    finally:
        third.close()


def test_an_ivf_snapshot_keeps_passages_and_catches_up_with_the_log(tmp_path: Path, jvm: None,
                                                                    builder) -> None:  # type: ignore[no-untyped-def]
    mains, deep = unit(700, seed=3), unit(1400, seed=4)
    sets = long_sets(mains, deep, every=7)
    shard = load(tmp_path, builder)
    ids = write(shard, sets[:600])
    shard.wait_built(60)
    assert shard.dense.tier == "ivf" and (tmp_path / DENSE_SNAPSHOT).exists()
    ids += write(shard, sets[600:], start=600)           # after the snapshot: only in the log
    docs = {m.memory_id: m.doc_id for m in shard.store.all()}
    with shard.write_lock:
        shard.apply(deletes=[ids[0], ids[602]])          # one long memory from each side of the snapshot
    crash(shard)

    again = load(tmp_path, builder)
    try:
        assert again.dense.tier == "ivf"
        long_ids = [i for i in range(0, 700, 7) if i not in (0, 602)]
        assert len(again.dense) == 698 + 2 * len(long_ids) and again.dense.passage_vectors == 2 * len(long_ids)
        assert found(again, deep[[2 * i + 1 for i in long_ids]]) == [docs[ids[i]] for i in long_ids]
        _, hits = again.dense.search(deep[[0, 1, 2 * 602, 2 * 602 + 1]], 10)
        assert not {docs[ids[0]], docs[ids[602]]} & set(hits.ravel().tolist())
    finally:
        again.close()
