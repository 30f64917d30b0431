"""The pairwise calibration fit and its offline proxy (benchmarks/quality/calibration_rank.py), on rows built here."""

from __future__ import annotations

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV, LOCOMO_HELD_OUT
from benchmarks.quality.calibrate import select
from benchmarks.quality.calibration_rank import _pairs, fit_pairwise, proxy


def _queries(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """n queries of 20 rows: feature 0 orders a query's rows (its evidence has the highest), feature 1 is a
    per-query offset shared by all its rows, which says nothing about the order inside a query but predicts
    whether a query has evidence at all."""
    xs, ys, qs = [], [], []
    for q in range(n):
        has = q % 2 == 0
        x = np.column_stack([rng.normal(size=20), np.full(20, 1.0 if has else -1.0)])
        y = np.zeros(20)
        if has:
            y[np.argsort(-x[:, 0])[:2]] = 1.0
        xs.append(x)
        ys.append(y)
        qs.append(np.full(20, q))
    x, y, q = np.vstack(xs), np.concatenate(ys), np.concatenate(qs)
    return {"fx": x, "fy": y, "fq": q, "rx": x, "ry": y, "rq": q, "rh": np.tile(np.arange(20), n)}


def test_pairs_are_one_query_evidence_against_its_others() -> None:
    x = np.array([[1.0], [0.0], [5.0], [3.0], [2.0]])
    y = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    q = np.array([0, 0, 1, 1, 1])
    diffs, w = _pairs(x, y, q)
    assert sorted(diffs[:, 0].tolist()) == [1.0, 2.0, 3.0]   # 1−0; 5−3, 5−2; never across queries
    assert np.isclose(w[0], 1.0) and np.allclose(w[1:], 0.5)


def test_pairwise_direction_orders_inside_each_query() -> None:
    rng = np.random.default_rng(3)
    rows = {"scifact": _queries(rng, 30)}
    for conv in LOCOMO_DEV + LOCOMO_HELD_OUT:
        rows[f"locomo:{conv}"] = _queries(rng, 10)
    coef, intercept = fit_pairwise(select(rows, LOCOMO_DEV), "fx", "fy", "fq")
    assert coef[0] > 0                       # the feature that orders a query's rows
    # every query's two evidence rows are its two best by the fitted score
    x, y, q = rows["scifact"]["fx"], rows["scifact"]["fy"], rows["scifact"]["fq"]
    for qi in np.unique(q)[::2]:
        idx = np.flatnonzero(q == qi)
        top = idx[np.argsort(-(x[idx] @ coef))[:2]]
        assert y[top].sum() == 2
    assert 0.0 < 1.0 / (1.0 + np.exp(-(x @ coef + intercept))).mean() < 1.0


def test_proxy_reads_the_rerank_model_where_a_hit_was_reranked() -> None:
    # one query, 12 candidates; evidence at positions 2 and 9. The fused model ranks by feature 0 (position order:
    # higher first), the rerank model (hits 0-3 reranked) by its own feature.
    fx = np.array([[12.0 - i] for i in range(12)])
    fy = np.zeros(12)
    fy[[2, 9]] = 1.0
    rows = {"fx": fx, "fy": fy, "fq": np.zeros(12, dtype=np.int64),
            "rx": np.array([[0.0], [0.0], [50.0], [0.0]]), "ry": fy[:4], "rq": np.zeros(4, dtype=np.int64),
            "rh": np.arange(4)}
    fused_only = {"fused": (np.array([1.0]), 0.0), "rerank": (np.array([0.0]), -60.0)}   # reranked hits sink
    got = proxy(rows, fused_only)
    assert got["R@5"] == 0.0 and got["R@10"] == 0.5           # evidence 2 sank below all; 9 is 6th of the rest
    both = {"fused": (np.array([1.0]), -30.0), "rerank": (np.array([1.0]), 0.0)}   # reranked hit 2 on top
    got = proxy(rows, both)
    assert got["R@5"] == 0.5 and got["R@10"] == 1.0 and got["questions"] == 1
