"""Passage vectors: a long memory's further windows in the dense index, each under an id that names its memory.

The embedder reads the first ``advanced.embed_max_length`` tokens of a memory; a memory whose text runs past them
also gets up to ``advanced.passage_vectors`` vectors of narrow overlapping windows over it (``advanced.passage_tokens``
tokens each; the write stage cuts them from the tokenizer's ids: server/engine/ingest.py, models/embedder.py). A
memory's vectors travel as one array: row 0 is its main vector, the rows after it its passages; a short memory has
one row (or a plain ``(dim,)`` vector), exactly as before.

In the dense index passage ``j`` (1-based) of doc ``d`` has the id ``d | j << PASSAGE_SHIFT``: the memory of any id is
``id & DOC_MASK``, with no table to persist — an IVF snapshot keeps the ids it was built with. A search over an index
that holds passages fetches enough rows that ``k`` distinct memories come back and keeps each memory once, with its
best score (max pooling over its vectors), so top-k counts memories. Pure functions; the index owns the counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

PASSAGE_SHIFT = 40                    # doc ids are allocated from 1 upwards: 2^40 of them before a clash
DOC_MASK = (1 << PASSAGE_SHIFT) - 1
MAX_PASSAGES = 64                     # the most passages a memory may carry (advanced.passage_vectors is at most it)


def rows_of(vectors: np.ndarray, dim: int) -> np.ndarray:
    """A memory's vectors as ``(1 + passages, dim)`` float32 rows (a ``(dim,)`` vector is one row)."""
    out = np.ascontiguousarray(vectors, dtype=np.float32)
    if out.ndim == 1:
        out = out.reshape(1, -1)
    if out.ndim != 2 or out.shape[1] != dim or not 1 <= out.shape[0] <= 1 + MAX_PASSAGES:
        raise ValueError(f"a memory's vectors must be (dim,) or (1..{1 + MAX_PASSAGES}, {dim}), got {vectors.shape}")
    return out


def main_rows(vectors: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """Each memory's main vector, ``(n, dim)``: a 2-D array of main vectors as it is, else row 0 of each entry."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
        return vectors
    return np.stack([v if v.ndim == 1 else v[0] for v in vectors]) if len(vectors) else np.zeros((0, 0), np.float32)


def passage_ids(doc_id: int, n: int) -> np.ndarray:
    """The ids of passages 1..n of ``doc_id``."""
    return int(doc_id) + (np.arange(1, n + 1, dtype=np.int64) << PASSAGE_SHIFT)


def expand(doc_ids: Sequence[int] | np.ndarray, vectors: Sequence[np.ndarray] | np.ndarray, *,
           dim: int) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """(ids, rows, passages per doc) of memories given one vector set each: the main rows first, in order, then
    every passage under its id; the dict holds only docs that have passages."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
        return np.asarray(doc_ids, dtype=np.int64), np.ascontiguousarray(vectors, dtype=np.float32), {}
    sets = [rows_of(v, dim) for v in vectors]
    ids = [np.asarray(doc_ids, dtype=np.int64)]
    rows = [np.stack([s[0] for s in sets]) if sets else np.zeros((0, dim), np.float32)]
    counts: dict[int, int] = {}
    for doc, s in zip(doc_ids, sets, strict=True):
        if len(s) > 1:
            counts[int(doc)] = len(s) - 1
            ids.append(passage_ids(int(doc), len(s) - 1))
            rows.append(s[1:])
    return np.concatenate(ids), np.concatenate(rows), counts


def removal_ids(doc_ids: Iterable[int], counts: dict[int, int] | None = None) -> np.ndarray:
    """Every id of ``doc_ids`` in the index: each doc and its passages (``counts``; None: every id a passage may
    have, for an index whose counts are not known, e.g. a snapshot being caught up)."""
    out = []
    for doc in doc_ids:
        n = MAX_PASSAGES if counts is None else counts.get(int(doc), 0)
        out.append(np.asarray([int(doc)], dtype=np.int64))
        if n:
            out.append(passage_ids(int(doc), n))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def fetch_depth(k: int, *, passages: int, most: int) -> int:
    """Rows to fetch so that ``k`` distinct memories come back from an index holding ``passages`` passage vectors,
    at most ``most`` for one memory: each passage can take one row from a memory further down, and each of the k
    memories at most ``most``."""
    return k if passages <= 0 or k <= 0 else min(k + passages, k * (1 + most))


def pool(scores: np.ndarray, ids: np.ndarray, k: int, *, passages: bool = True,
         discount: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (scores, ids), best first, cut to ``k`` memories each: every id mapped to its memory, each memory
    kept once at its best score — max pooling over its vectors, a passage's cosine less ``discount`` (0: plain
    max). ``passages`` False: passage rows are dropped instead (main vectors only). Missing slots: score -inf,
    id -1."""
    nq = scores.shape[0]
    out_s = np.full((nq, k), -np.inf, dtype=np.float32)
    out_i = np.full((nq, k), -1, dtype=np.int64)
    for q in range(nq):
        row = ids[q]
        keep = row >= 0
        if not passages:
            keep &= row <= DOC_MASK
        row_s = scores[q][keep]
        if discount and passages:
            row_s = np.where(row[keep] > DOC_MASK, row_s - np.float32(discount), row_s)
            order = np.argsort(-row_s, kind="stable")
            row_s, kept = row_s[order], row[keep][order]
        else:
            kept = row[keep]
        docs = kept & DOC_MASK
        _, first = np.unique(docs, return_index=True)
        first = np.sort(first)[:k]
        out_s[q, :len(first)] = row_s[first]
        out_i[q, :len(first)] = docs[first]
    return out_s, out_i
