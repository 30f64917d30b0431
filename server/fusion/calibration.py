"""Relevance with magnitude: a logistic calibration of a candidate's retrieval evidence into the
probability that it answers the query.

Two models, each ``p = sigmoid(intercept + coef · features)``, fitted on labelled dev queries by
``benchmarks/quality/calibrate.py`` and shipped as JSON (``server/fusion/calibration.json``):

* ``fused``: every candidate of the hybrid list, from ``dense`` (the query–memory cosine; a candidate
  the dense list did not return gets that list's lowest cosine, a bound), ``bm25`` (its BM25 score over
  the query's best; 0 where BM25 did not return it), ``rrf`` (its fused score over the highest possible) and
  ``dense_gap`` (its cosine minus the query's best: e5's cosines crowd into a narrow band, so how far a
  memory lies behind the query's nearest one says more than the cosine itself).
* ``rerank``: the reranked head, from the cross-encoder's ``logit`` and ``logit_gap`` (the logit minus the
  head's best) with ``rrf``, ``dense``, ``dense_gap`` and ``bm25`` as above (the hybrid evidence a cross-encoder trained
  on little data lacks: README "Ranking"); the JSON names which.

The probabilities are comparable across queries, so a threshold (the context block's ``min_relevance``)
means the same for every query. Pure arrays in, arrays out.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FUSED_FEATURES = ("dense", "bm25", "rrf", "dense_gap")    # what each model may read; its JSON names which
RERANK_FEATURES = ("logit", "rrf", "dense", "dense_gap", "logit_gap", "bm25")
BUNDLED_CALIBRATION = Path(__file__).with_name("calibration.json")


@dataclass(frozen=True)
class Logistic:
    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float

    def __post_init__(self) -> None:
        if len(self.features) != len(self.coef):
            raise ValueError("one coefficient per feature")

    def __call__(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """``columns`` holds at least this model's features (others are ignored)."""
        z = np.full(len(columns[self.features[0]]), self.intercept, dtype=np.float64)
        for name, c in zip(self.features, self.coef, strict=True):
            z = z + c * np.asarray(columns[name], dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60.0, 60.0)))


@dataclass(frozen=True)
class Calibration:
    fused: Logistic
    rerank: Logistic
    source: str = ""   # which data fitted it (README "Ranking")


def _logistic(d: dict, features: tuple[str, ...]) -> Logistic:
    found = tuple(d["features"])
    if not found or not set(found) <= set(features) or len(set(found)) != len(found):
        raise ValueError(f"calibration features {found} are not distinct names among {features}")
    return Logistic(features=found, coef=tuple(float(c) for c in d["coef"]), intercept=float(d["intercept"]))


def load_calibration(path: Path = BUNDLED_CALIBRATION, *, embedder: str = "", reranker: str = "") -> Calibration:
    """The fit for this embedder (by name; its dense cosines and fused scores are what the models read), else
    the file's ``default`` fit. A fit names the cross-encoder it was made with; another one is logged."""
    data = json.loads(Path(path).read_text())
    fits = data["fits"]
    name = embedder if embedder in fits else data["default"]
    fit = fits[name]
    if reranker and fit.get("reranker") and fit["reranker"] != reranker:
        log.warning("relevance calibration %s was fitted with %s, not %s", name, fit["reranker"], reranker)
    return Calibration(fused=_logistic(fit["fused"], FUSED_FEATURES), rerank=_logistic(fit["rerank"], RERANK_FEATURES),
                       source=f"{name}: {fit.get('source', '')}")


def fused_features(cand_ids: np.ndarray, rrf_norm: np.ndarray, dense_ids: np.ndarray, dense_scores: np.ndarray,
                   lexical_ids: np.ndarray, lexical_scores: np.ndarray) -> dict[str, np.ndarray]:
    """The ``fused`` model's columns for fused candidates ``cand_ids`` (each list filtered, in its order; a dense
    list the query adapter chose holds cosines out of order, so its best and its floor are its max and min)."""
    n = len(cand_ids)
    dense = np.full(n, float(np.min(dense_scores)) if len(dense_scores) else 0.0)
    bm25 = np.zeros(n)
    for ids, scores, out, scale in ((dense_ids, dense_scores, dense, 1.0),
                                    (lexical_ids, lexical_scores, bm25,
                                     float(lexical_scores[0]) if len(lexical_scores) and lexical_scores[0] > 0 else 1.0)):
        if len(ids) == 0 or n == 0:
            continue
        order = np.argsort(ids, kind="stable")
        pos = np.searchsorted(ids[order], cand_ids)
        pos = np.minimum(pos, len(ids) - 1)
        found = ids[order][pos] == cand_ids
        out[found] = scores[order][pos[found]] / scale
    best = float(np.max(dense_scores)) if len(dense_scores) else 0.0
    return {"dense": dense, "bm25": bm25, "rrf": np.asarray(rrf_norm, dtype=np.float64),
            "dense_gap": dense - best if len(dense_scores) else np.zeros(n)}
