"""Relevance with magnitude: a logistic calibration of a candidate's retrieval evidence into the
probability that it answers the query.

Two models, each ``p = sigmoid(intercept + coef · features)``, fitted on labelled dev queries by
``benchmarks/quality/calibrate.py`` and shipped as JSON (``server/fusion/calibration.json``):

* ``fused``: every candidate of the hybrid list, from ``dense`` (the query–memory cosine; a candidate
  the dense list did not return gets that list's lowest cosine, a bound), ``bm25`` (its BM25 score over
  the query's best; 0 where BM25 did not return it) and ``rrf`` (its fused score over the highest possible).
* ``rerank``: the reranked head, from the cross-encoder's ``logit`` and ``rrf`` (the fused order is
  evidence the cross-encoder lacks: README "Ranking").

The probabilities are comparable across queries, so a threshold (the context block's ``min_relevance``)
means the same for every query. Pure arrays in, arrays out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FUSED_FEATURES = ("dense", "bm25", "rrf")
RERANK_FEATURES = ("logit", "rrf")
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
        z = np.full(len(next(iter(columns.values()))) if columns else 0, self.intercept, dtype=np.float64)
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
    if found != features:
        raise ValueError(f"calibration features {found} != {features}")
    return Logistic(features=found, coef=tuple(float(c) for c in d["coef"]), intercept=float(d["intercept"]))


def load_calibration(path: Path = BUNDLED_CALIBRATION, *, embedder: str = "", reranker: str = "") -> Calibration:
    """The models fitted for this embedder and cross-encoder (by name), else the file's ``default`` entry."""
    data = json.loads(Path(path).read_text())
    fused = data["fused"].get(embedder) or data["fused"]["default"]
    rerank = data["rerank"].get(reranker) or data["rerank"]["default"]
    return Calibration(fused=_logistic(fused, FUSED_FEATURES), rerank=_logistic(rerank, RERANK_FEATURES),
                       source=str(data.get("source", "")))


def fused_features(cand_ids: np.ndarray, rrf_norm: np.ndarray, dense_ids: np.ndarray, dense_scores: np.ndarray,
                   lexical_ids: np.ndarray, lexical_scores: np.ndarray) -> dict[str, np.ndarray]:
    """The ``fused`` model's columns for fused candidates ``cand_ids`` (each list filtered, best first)."""
    n = len(cand_ids)
    dense = np.full(n, float(dense_scores[-1]) if len(dense_scores) else 0.0)
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
    return {"dense": dense, "bm25": bm25, "rrf": np.asarray(rrf_norm, dtype=np.float64)}
