"""Passage vectors in a tenant's dense index: each memory once at its best vector, deletes take every vector of a
memory, promotion to IVF keeps them, and memories that fit add no entry."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from server.index.memory_vectors import DOC_MASK, fetch_depth, passage_ids, pool, removal_ids
from server.index.tiered import TieredDenseIndex
from server.index.tiers import TierRules
from tests.unit.index.test_tiered import builder

__all__ = ["builder"]   # the fixture, used by name
DIM = 16
RULES = TierRules(promote_at=600, codes="Flat", nprobe=64, ef_search=64, train_per_list=30)


def unit(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_pool_keeps_each_memory_once_at_its_best_row() -> None:
    ids = np.array([[passage_ids(7, 2)[1], 3, 7, passage_ids(3, 1)[0], 9, -1]])
    scores = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, -np.inf]], dtype=np.float32)
    s, i = pool(scores, ids, 3)
    assert i.tolist() == [[7, 3, 9]] and s[0].tolist() == pytest.approx([0.9, 0.8, 0.5])
    s, i = pool(scores, ids, 3, passages=False)   # main vectors only
    assert i.tolist() == [[3, 7, 9]] and s[0].tolist() == pytest.approx([0.8, 0.7, 0.5])
    s, i = pool(scores, ids, 5)
    assert i.tolist() == [[7, 3, 9, -1, -1]] and np.isneginf(s[0, 3:]).all()


def test_fetch_depth_reaches_k_memories_and_costs_nothing_without_passages() -> None:
    assert fetch_depth(10, passages=0, most=0) == 10
    assert fetch_depth(10, passages=3, most=2) == 13
    assert fetch_depth(10, passages=1000, most=4) == 50
    assert removal_ids([5], {5: 2}).tolist() == [5, 5 | 1 << 40, 5 | 2 << 40]


def test_search_returns_each_memory_once_with_the_max_over_its_vectors() -> None:
    index = TieredDenseIndex(DIM, rules=TierRules(promote_at=0))
    mains = unit(50, seed=1)
    deep = unit(3, seed=2)                     # memory 10's passages: nothing like its main vector
    sets: list[np.ndarray] = list(mains)
    sets[10] = np.vstack([mains[10], deep])
    index.add(np.arange(50), sets)
    assert len(index) == 53 and index.passage_vectors == 3 and index.passages_of(10) == 3
    scores, ids = index.search(deep[1][None, :], 5)
    assert ids[0, 0] == 10 and scores[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert len(set(ids[0].tolist())) == 5 and (ids[0] <= DOC_MASK).all()   # k memories, not k vectors
    # every memory is found once, even when all of a memory's vectors are near the query
    scores, ids = index.search(np.vstack([deep, mains[10]]), 50)
    assert all(sorted(row.tolist()) == list(range(50)) for row in ids)
    # main vectors only: memory 10 ranks by its main vector (what the near-duplicate rules read)
    _, ids = index.search(deep[1][None, :], 50, passages=False)
    flat = mains @ deep[1]
    assert ids[0].tolist() == np.argsort(-flat, kind="stable").tolist()


def test_memories_with_many_passages_come_back_once_and_their_ids_stay_apart() -> None:
    from server.index.memory_vectors import MAX_PASSAGES

    most = 16                                                  # narrow windows (passage_tokens 48): 16 a long turn
    ids = passage_ids(DOC_MASK, MAX_PASSAGES)                 # the last doc id, the most passages: no overflow
    assert (ids > 0).all() and ((ids & DOC_MASK) == DOC_MASK).all() and len(set(ids.tolist())) == MAX_PASSAGES
    index = TieredDenseIndex(DIM, rules=TierRules(promote_at=0))
    mains, deep = unit(30, seed=3), unit(3 * most, seed=4)
    sets: list[np.ndarray] = list(mains)
    for j, doc in enumerate((4, 11, 20)):                     # three memories, each with the most passages
        sets[doc] = np.vstack([mains[doc], deep[j * most:(j + 1) * most]])
    index.add(np.arange(30), sets)
    assert index.passage_vectors == 3 * most and index.passages_of(11) == most
    _, found = index.search(deep[most:2 * most], 10)           # every passage of memory 11 finds it, once, first
    assert (found[:, 0] == 11).all() and all(len(set(row.tolist())) == 10 for row in found)
    index.remove([11])
    assert index.passage_vectors == 2 * most and 11 not in index.search(deep[most:2 * most], 29)[1]


def test_short_memories_add_no_entry_and_search_as_before() -> None:
    index = TieredDenseIndex(DIM, rules=TierRules(promote_at=0))
    mains = unit(40, seed=3)
    index.add(np.arange(40), list(mains))
    assert len(index) == 40 and index.passage_vectors == 0
    scores, ids = index.search(mains[:3], 4)
    plain = TieredDenseIndex(DIM, rules=TierRules(promote_at=0))
    plain.add(np.arange(40), mains)
    assert (ids == plain.search(mains[:3], 4)[1]).all()


def test_remove_takes_every_vector_of_a_memory() -> None:
    index = TieredDenseIndex(DIM, rules=TierRules(promote_at=0))
    mains, deep = unit(20, seed=4), unit(4, seed=5)
    index.add(np.arange(20), [np.vstack([m, deep]) if i == 3 else m for i, m in enumerate(mains)])
    assert len(index) == 24
    assert index.remove([3]) == 5
    assert len(index) == 19 and index.passage_vectors == 0
    _, ids = index.search(deep, 19)
    assert 3 not in set(ids.ravel().tolist())


def test_promotion_keeps_passages_and_deletes_made_during_and_after_it(builder: ThreadPoolExecutor) -> None:
    index = TieredDenseIndex(DIM, rules=RULES, builder=builder)
    mains = unit(700, seed=6)
    deep = unit(100, seed=7)
    # memories 0..49 carry two passages each: the second is a query target far from their main vector
    sets = [np.vstack([mains[i], deep[i], deep[50 + i]]) if i < 50 else mains[i] for i in range(700)]
    index.add(np.arange(400), sets[:400])
    future = index.add(np.arange(400, 700), sets[400:])
    index.remove([0, 1])                                   # may land before or during the build
    assert future is not None and future.result(60) is True
    assert index.tier == "ivf" and len(index) == 700 - 2 + 96
    _, ids = index.search(deep[50 + 2: 50 + 10], 3)
    assert ids[:, 0].tolist() == list(range(2, 10))
    index.remove([2])
    _, ids = index.search(deep[[2, 52]], 10)
    assert 2 not in set(ids.ravel().tolist()) and len(index) == 700 - 3 + 94


def test_a_discount_ranks_a_passage_below_an_equal_main_vector() -> None:
    ids = np.array([[passage_ids(7, 1)[0], 3, 7]])
    scores = np.array([[0.80, 0.79, 0.50]], dtype=np.float32)
    s, i = pool(scores, ids, 2, discount=0.02)
    assert i.tolist() == [[3, 7]] and s[0].tolist() == pytest.approx([0.79, 0.78])
