"""scheduler.embed_chunks: a write batch's sub-batches by length, within a token budget, one per lane at least."""

from __future__ import annotations

import random

from server.batching.scheduler import embed_chunks


def test_every_row_once_longest_first_and_within_the_budget() -> None:
    rng = random.Random(0)
    lengths = [rng.choice([12, 30, 250, 256]) for _ in range(128)]
    chunks = embed_chunks(lengths, max_tokens=1024, parts=2)
    rows = [i for c in chunks for i in c]
    assert sorted(rows) == list(range(128))
    assert [lengths[i] for i in rows] == sorted(lengths, reverse=True)   # similar lengths share a chunk
    assert all(sum(lengths[i] for i in c) <= 1024 for c in chunks)
    assert len(chunks) % 2 == 0   # whole rounds across the two lanes


def test_at_least_one_chunk_per_lane_of_about_equal_tokens() -> None:
    chunks = embed_chunks([20] * 64, max_tokens=4096, parts=2)
    assert [len(c) for c in chunks] == [32, 32]
    assert embed_chunks([20] * 64, max_tokens=4096, parts=1) == [list(range(64))]
    assert embed_chunks([7], max_tokens=4096, parts=4) == [[0]]   # never an empty chunk
    assert embed_chunks([], max_tokens=4096, parts=2) == []


def test_a_text_longer_than_the_budget_runs_alone() -> None:
    assert embed_chunks([5000, 3, 4], max_tokens=1000) == [[0], [2, 1]]
