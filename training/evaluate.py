"""BM25 vs BM25 + reranker on mined candidate lists, scored with the shared benchmark metrics.

The reranked order is the server's: the top ``depth`` candidates ordered by the cross-encoder's
logit (ties keep candidate order), the rest after them in candidate order. ``blend`` > 0 instead fuses the
two orders of the top ``depth`` as the server does (``server.fusion.rrf.rerank_relevance``, k = 60,
weight = blend); the recipe only reports it, measured on the dev claims.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

import numpy as np

from benchmarks.quality.datasets import evaluate
from models.base import Reranker
from training.data import MinedQuery
from server.fusion.rrf import rerank_relevance

log = logging.getLogger(__name__)

RRF_K = 60.0


def score_candidates(reranker: Reranker, mined: Sequence[MinedQuery], docs: Mapping[str, str], *,
                     depth: int) -> dict[str, np.ndarray]:
    """Logits of each query's top ``depth`` candidates, in one ``score`` call per query."""
    out: dict[str, np.ndarray] = {}
    started = time.perf_counter()
    for i, q in enumerate(mined):
        out[q.id] = reranker.score([(q.text, docs[d]) for d in q.candidates[:depth]])
        if (i + 1) % 50 == 0:
            log.info("scored %d/%d queries (%.0fs)", i + 1, len(mined), time.perf_counter() - started)
    return out


def reorder(candidates: Sequence[str], logits: np.ndarray, *, blend: float = 0.0) -> list[str]:
    depth = len(logits)
    by_logit = sorted(range(depth), key=lambda i: (-float(logits[i]), i))
    if blend > 0:  # the server's own fusion of the reranked head (search.rerank_weight = blend)
        fused = rerank_relevance([float(x) for x in logits], k=RRF_K, weight=blend)
        by_logit = sorted(range(depth), key=lambda i: (-fused[i], i))
    return [candidates[i] for i in by_logit] + list(candidates[depth:])


def compare(mined: Sequence[MinedQuery], logits: Mapping[str, np.ndarray], *,
            blends: Sequence[float] = (), ks: Sequence[int] = (10,)) -> dict[str, dict[str, float]]:
    """``{"bm25": metrics, "bm25+rerank": metrics, "bm25+rerank(blend=w)": metrics, ...}``."""
    qrels = {q.id: {d: 1 for d in q.positives} for q in mined}
    runs = {"bm25": {q.id: list(q.candidates) for q in mined},
            "bm25+rerank": {q.id: reorder(q.candidates, logits[q.id]) for q in mined}}
    for w in blends:
        runs[f"bm25+rerank(blend={w:g})"] = {q.id: reorder(q.candidates, logits[q.id], blend=w) for q in mined}
    return {name: {k: round(v, 4) for k, v in evaluate(run, qrels, ks=ks).items()} for name, run in runs.items()}
