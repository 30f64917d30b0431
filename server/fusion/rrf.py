"""Reciprocal rank fusion: pure rank arithmetic over ranked lists (first-stage fusion and the rerank head)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def rrf(ranked_ids: Sequence[np.ndarray], *, k: float = 60.0,
        weights: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fuses ranked id lists (best first; ids < 0 are padding and skipped).

    score(d) = sum_i weights[i] / (k + rank_i(d)), ranks 1-based. Returns (scores, ids) best first;
    ties are broken by the smaller id, so the result is deterministic.
    """
    if k <= 0:
        raise ValueError("k must be > 0")
    weights = [1.0] * len(ranked_ids) if weights is None else list(weights)
    if len(weights) != len(ranked_ids):
        raise ValueError("one weight per list")
    fused: dict[int, float] = {}
    for ids, weight in zip(ranked_ids, weights, strict=True):
        if weight == 0:
            continue
        rank = 0
        seen: set[int] = set()
        for doc in np.asarray(ids, dtype=np.int64).ravel().tolist():
            if doc < 0 or doc in seen:
                continue
            seen.add(doc)
            rank += 1
            fused[doc] = fused.get(doc, 0.0) + weight / (k + rank)
    if not fused:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64)
    ids_arr = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
    scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    order = np.lexsort((ids_arr, -scores))
    return scores[order], ids_arr[order]


def rrf_filtered(ranked_ids: Sequence[np.ndarray], *, k: float = 60.0,
                 weights: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rrf` for lists that hold no padding and no repeats (what the search pipeline has after
    filtering), in array operations: the same scores, summed in the same order, and the same order."""
    if k <= 0:
        raise ValueError("k must be > 0")
    if len(weights) != len(ranked_ids):
        raise ValueError("one weight per list")
    parts = [(np.asarray(ids, dtype=np.int64), w) for ids, w in zip(ranked_ids, weights, strict=True)
             if w != 0 and len(ids)]
    if not parts:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64)
    ids_all = np.concatenate([ids for ids, _ in parts])
    contrib = np.concatenate([w / (k + np.arange(1, len(ids) + 1, dtype=np.float64)) for ids, w in parts])
    uniq, inverse = np.unique(ids_all, return_inverse=True)
    scores = np.bincount(inverse, weights=contrib, minlength=len(uniq))  # adds in list order, as rrf does
    order = np.lexsort((uniq, -scores))
    return scores[order], uniq[order]


def rrf_max(*, k: float, weights: Sequence[float]) -> float:
    """The highest fused score possible: first in every list. Divides rrf into (0, 1]."""
    return sum(w / (k + 1.0) for w in weights if w > 0) or 1.0


def rerank_relevance(logits: Sequence[float], *, k: float, weight: float) -> list[float]:
    """Relevance in (0, 1] of the reranked head of a fused list (``logits[i]`` is the cross-encoder's
    logit of fused rank ``i``): reciprocal rank fusion of the fused order and the cross-encoder's
    order, ``1/(k + fused rank) + weight/(k + logit rank)``, divided by its largest possible value.
    The fused order is itself hybrid evidence that a cross-encoder trained on little data lacks;
    a large ``weight`` leaves the cross-encoder's order alone. Ties between equal logits keep fused order."""
    by_logit = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    logit_rank = [0] * len(logits)
    for r, i in enumerate(by_logit):
        logit_rank[i] = r
    top = rrf_max(k=k, weights=(1.0, weight))
    return [(1.0 / (k + i + 1.0) + weight / (k + logit_rank[i] + 1.0)) / top for i in range(len(logits))]
