"""A Write's near-duplicate rows: with a floor (the lower of the merge and update-link thresholds) they are the
unfloored rows cut at the floor, best first, stored and staged alike; and the Write's outcomes stay the rules'."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from server.config import MemoryConfig
from server.domain import Memory, MemoryInput, MemoryStatus, MemoryType, WriteOutcome
from server.engine.write import Staging, batch_neighbours, commit_writes, new_memory_id
from server.tenants.shard import TenantShard
from tests.engine_support import T0, make_shard, vectors, write


def _near(base: np.ndarray, rng: np.random.Generator, eps: float) -> np.ndarray:
    v = base + eps * rng.normal(size=base.shape).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _staged(row: int) -> Memory:
    return Memory(memory_id=new_memory_id(), doc_id=1000 + row, content=f"new {row}", type=MemoryType.SEMANTIC,
                  importance=0.5, created_at_ms=T0, last_access_at_ms=T0, access_count=0, entities=(), source_ref="",
                  scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                  pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=T0)


def _stored(tmp_path: Path) -> tuple[TenantShard, np.ndarray]:
    """A shard holding 12 memories of random vectors (no merges, no links), and their vectors."""
    shard = make_shard(tmp_path / "t")
    stored = vectors(12, seed=1)
    with shard.write_lock:
        commit_writes(shard, [MemoryInput(content=f"stored {i}") for i in range(12)], stored,
                      cfg=MemoryConfig(dedupe_cosine=1.01, update_link_cosine=1.01), now_ms=T0)
    return shard, stored


def test_floored_rows_are_the_unfloored_rows_cut_at_the_floor(tmp_path: Path) -> None:
    shard, stored = _stored(tmp_path)
    rng = np.random.default_rng(2)
    batch = np.stack([_near(stored[i % 12], rng, 0.05 * (i % 4)) for i in range(10)])
    hits, sims = batch_neighbours(shard, batch)
    staging = Staging(shard)
    for row in range(6):   # six of the batch staged already, as commit_writes stages them
        staging.put(_staged(row), batch[row], row)
    for row in range(10):
        every = staging.near_duplicates(batch[row], hits=(hits[0][row], hits[1][row]), batch_sims=sims[row])
        for floor in (0.5, 0.9, 0.99):
            floored = staging.near_duplicates(batch[row], hits=(hits[0][row], hits[1][row]), batch_sims=sims[row],
                                              floor=floor)
            assert floored == [p for p in every if p[0] >= floor]
        assert len(every) == 8 + 6   # NEAR_K stored, every staged put


def test_a_write_merges_a_near_copy_of_a_stored_and_of_a_staged_memory(tmp_path: Path) -> None:
    shard = make_shard(tmp_path / "t")
    first = write(shard, [MemoryInput(content="Ana adopted a dog")], now_ms=T0, seed=3)
    v = vectors(1, seed=3)[0]
    other = vectors(1, seed=4)[0]
    with shard.write_lock:
        results = commit_writes(shard, [MemoryInput(content="Ana adopted a dog!"), MemoryInput(content="Ben sold a bike"),
                                        MemoryInput(content="Ben sold a bike.")],
                                np.stack([v, other, other]),
                                cfg=MemoryConfig(dedupe_cosine=0.95, update_link_cosine=0.9), now_ms=T0 + 1000)
    assert [r.outcome for r in results] == [WriteOutcome.MERGED, WriteOutcome.CREATED, WriteOutcome.MERGED]
    assert results[0].merged_into == first[0].memory_id and results[2].merged_into == results[1].memory_id
    assert len(shard.store) == 2


def test_may_link_holds_every_row_with_a_neighbour_at_the_link_floor(tmp_path: Path) -> None:
    """A row may_link rules out has no stored or staged neighbour at or above the floor: the linker had none to
    read."""
    from server.engine.write import may_link

    shard, stored = _stored(tmp_path)
    rng = np.random.default_rng(5)
    batch = np.stack([_near(stored[i], rng, 0.02) if i < 3 else vectors(1, seed=100 + i)[0] for i in range(9)]
                     + [_near(vectors(1, seed=108)[0], rng, 0.02)])
    hits, sims = batch_neighbours(shard, batch)
    staging = Staging(shard)
    for row in range(10):
        staging.put(_staged(row), batch[row], row)
    for floor in (0.5, 0.9):
        linkable = may_link(hits[0], sims, floor)
        for row in range(10):
            others = [p for p in staging.near_duplicates(batch[row], hits=(hits[0][row], hits[1][row]),
                                                         batch_sims=sims[row], floor=floor)
                      if p[1].content != f"new {row}"]
            assert bool(others) == bool(linkable[row]), (floor, row)
    assert may_link(hits[0], sims, 0.9)[:3].all() and may_link(hits[0], sims, 0.9)[8:].all()
    assert not may_link(hits[0], sims, 0.9)[3:8].any()
