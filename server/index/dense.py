"""Exact dense search for one tenant: FAISS inner product over L2-normalised vectors, ID-mapped."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import faiss
import numpy as np


def empty_result(n_queries: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    k = max(k, 0)
    return (np.full((n_queries, k), -np.inf, dtype=np.float32), np.full((n_queries, k), -1, dtype=np.int64))


# FAISS's flat scan (faiss-cpu 1.15) against one GEMM and a top-k per row, k = 8, 384-d, one thread each (ms;
# docs/benchmarks/ingest.md): a Write's 128 near-duplicate lookups over 4,096 vectors 31.7 against 5.8, over 20,000
# 159 against 29; 8 queries over 20,000 10.1 against 7.5; one query 1.34 against 1.46, two 2.5 against 5.5.
GEMM_FROM_QUERIES = 8
# Vectors scored at once per query in top_k: a block's (queries, block) scores stay within ~64 MiB at 128 queries.
SCORE_BLOCK = 131_072


def top_k(queries: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` (≤ len(vectors)) highest inner products of each query with ``vectors``, best first: (scores, rows),
    each (n_queries, k). Equal scores keep the lower row first."""
    best_s: np.ndarray | None = None
    best_r: np.ndarray | None = None
    for start in range(0, len(vectors), SCORE_BLOCK):
        block = queries @ vectors[start:start + SCORE_BLOCK].T
        take = min(k, block.shape[1])
        rows = (np.argpartition(-block, take - 1, axis=1)[:, :take] if take < block.shape[1]
                else np.broadcast_to(np.arange(take), block.shape).copy())
        s, r = np.take_along_axis(block, rows, axis=1), rows + start
        if best_s is not None and best_r is not None:
            s, r = np.concatenate((best_s, s), axis=1), np.concatenate((best_r, r), axis=1)
        if s.shape[1] > k:
            keep = np.argpartition(-s, k - 1, axis=1)[:, :k]
            s, r = np.take_along_axis(s, keep, axis=1), np.take_along_axis(r, keep, axis=1)
        best_s, best_r = s, r
    assert best_s is not None and best_r is not None
    order = np.lexsort((best_r, -best_s), axis=1)
    return np.take_along_axis(best_s, order, axis=1), np.take_along_axis(best_r, order, axis=1)


class FaissIdIndex:
    """What every FAISS index with tenant-local int64 ids shares: size, add and remove under one lock.
    Subclasses set ``dim``, ``_index`` and ``_lock``."""

    dim: int
    _index: faiss.Index
    _lock: threading.RLock

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None:
        if len(ids) == 0:
            return
        vecs = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        with self._lock:
            self._index.add_with_ids(vecs, np.asarray(ids, dtype=np.int64))

    def remove(self, ids: Sequence[int] | np.ndarray) -> int:
        if len(ids) == 0:
            return 0
        with self._lock:
            return int(self._index.remove_ids(np.asarray(ids, dtype=np.int64)))

    def reconstruct_batch(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids`` (decoded for SQ8/PQ codes), (len(ids), dim); an id not held raises."""
        keys = np.asarray(ids, dtype=np.int64)
        if len(keys) == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        with self._lock:
            return np.asarray(self._index.reconstruct_batch(keys), dtype=np.float32).reshape(len(keys), self.dim)


class FlatDenseIndex(FaissIdIndex):
    """``IndexIDMap2(IndexFlatIP)``: exact cosine search with tenant-local int64 ids."""

    tier = "flat"
    description = "IDMap2,Flat"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._flat = faiss.IndexFlatIP(dim)
        self._index = faiss.IndexIDMap2(self._flat)
        self._lock = threading.RLock()

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Returns (scores, ids), each (n_queries, k); missing slots have id -1.

        From GEMM_FROM_QUERIES queries on, one GEMM of the queries against FAISS's own vector buffer (read in place,
        under the lock) and a top-k per row, in blocks of vectors; fewer queries (a search's one per tenant) go
        through FAISS's flat scan, which is quicker for them."""
        q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        with self._lock:
            n = int(self._index.ntotal)
            if n == 0 or k <= 0:
                return empty_result(len(q), k)
            scores, ids = self._search_held(q, min(k, n), n)
        if ids.shape[1] < k:
            pad = k - ids.shape[1]
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
            ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=-1)
        return scores, ids

    def _search_held(self, q: np.ndarray, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the ``k`` ≤ ``n`` best of the ``n`` vectors held; the caller holds the lock."""
        if len(q) < GEMM_FROM_QUERIES:
            return self._index.search(q, k)
        vectors = faiss.rev_swig_ptr(self._flat.get_xb(), n * self.dim).reshape(n, self.dim)
        scores, rows = top_k(q, vectors, k)
        return scores, faiss.rev_swig_ptr(self._index.id_map.data(), n)[rows]

    def export(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of every (id, vector) held, for a promotion."""
        with self._lock:
            n = int(self._index.ntotal)
            ids = faiss.vector_to_array(self._index.id_map).astype(np.int64, copy=False)
            flat = faiss.downcast_index(self._index.index)
            vectors = faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(n, self.dim).copy() if n else \
                np.empty((0, self.dim), dtype=np.float32)
        return ids, vectors

    def reconstruct(self, doc_id: int) -> np.ndarray:
        return self.reconstruct_batch([doc_id])[0]

    def ram_bytes(self) -> int:
        return len(self) * (self.dim * 4 + 8 + 16)   # vector, id, id-map reverse entry
