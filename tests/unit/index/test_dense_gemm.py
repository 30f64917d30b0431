"""The flat tier's search as one GEMM and a top-k per row (server/index/dense.py top_k): the same hits and scores as
FAISS's own flat scan, in blocks or whole, with fewer vectors than k and after removals."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

import server.index.dense as dense
from server.index.dense import FlatDenseIndex, top_k


@pytest.mark.parametrize("n", [1, 5, 300])
@pytest.mark.parametrize("k", [1, 8, 400])
def test_the_gemm_finds_what_faiss_scans(n: int, k: int) -> None:
    rng = np.random.default_rng(n * 1000 + k)
    vectors = rng.normal(size=(n, 16)).astype(np.float32)
    ids = np.arange(n, dtype=np.int64) * 3 + 7
    index = FlatDenseIndex(16)
    index.add(ids, vectors)
    reference = faiss.IndexIDMap2(faiss.IndexFlatIP(16))
    reference.add_with_ids(vectors, ids)
    queries = rng.normal(size=(20, 16)).astype(np.float32)
    assert len(queries) >= dense.GEMM_FROM_QUERIES   # the GEMM's path
    scores, found = index.search(queries, k)
    want_scores, want_ids = reference.search(queries, min(k, n))
    assert scores.shape == found.shape == (20, k)
    assert np.allclose(scores[:, :min(k, n)], want_scores, atol=1e-5)
    assert (found[:, :min(k, n)] == want_ids).all()
    assert (found[:, min(k, n):] == -1).all() and np.isneginf(scores[:, min(k, n):]).all()


def test_a_few_queries_go_through_faiss_with_the_same_answer() -> None:
    rng = np.random.default_rng(6)
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    index = FlatDenseIndex(8)
    index.add(np.arange(40) + 100, vectors)
    queries = rng.normal(size=(dense.GEMM_FROM_QUERIES, 8)).astype(np.float32)
    many = index.search(queries, 5)
    one = [index.search(q[None, :], 5) for q in queries]
    assert np.allclose(many[0], np.vstack([s for s, _ in one]), atol=1e-5)
    assert (many[1] == np.vstack([i for _, i in one])).all()


def test_blocks_give_the_whole_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    vectors, queries = rng.normal(size=(50, 8)).astype(np.float32), rng.normal(size=(4, 8)).astype(np.float32)
    whole = top_k(queries, vectors, 10)
    monkeypatch.setattr(dense, "SCORE_BLOCK", 7)
    blocked = top_k(queries, vectors, 10)
    assert np.allclose(whole[0], blocked[0]) and (whole[1] == blocked[1]).all()
    assert (np.diff(whole[0], axis=1) <= 0).all()


def test_equal_scores_keep_the_lower_row_first() -> None:
    vectors = np.ones((6, 4), dtype=np.float32)
    _, rows = top_k(np.ones((1, 4), dtype=np.float32), vectors, 4)
    assert rows.tolist() == [[0, 1, 2, 3]]


def test_a_removed_vector_is_never_found() -> None:
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(30, 8)).astype(np.float32)
    index = FlatDenseIndex(8)
    index.add(np.arange(30), vectors)
    index.remove([3, 17])
    _, found = index.search(vectors[[3, 17, 5]], 30)
    assert 3 not in found and 17 not in found and found[2, 0] == 5
    assert (found[:, 28:] == -1).all()
