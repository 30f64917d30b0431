"""The relevance calibration fitted for the order inside a query, beside the shipped pointwise fit (offline).

    .venv/bin/python -m benchmarks.quality.calibrate --rows ROWS.npz --out /tmp/c.json --report /tmp/r.json  # collect
    .venv/bin/python -m benchmarks.quality.calibration_rank --rows ROWS.npz [--held-out]

The shipped fit (benchmarks/quality/calibrate.py) is a pointwise logistic regression over every candidate of every
query: most of its rows are candidates far below the answer, so the direction it finds separates easy negatives as
much as it orders a query's top. The *pairwise* variant fits the direction on pairs of one query's rows (an
evidence hit against a non-evidence hit of the same query; each query weighs the same, each data set the same), as
RankNet does with a linear model, then scales that one score to a probability with a pointwise logistic fit
(Platt), so the floors that read relevance keep their meaning.

Both are fitted on the same rows (SciFact train claims, LoCoMo dev conversations) and compared by an offline proxy:
per LoCoMo question, its candidates ordered as the server orders relevance (the rerank model where a hit was
reranked, the fused model elsewhere), the share of its evidence hits in the top 5 and top 10. The held-out
conversations' rows are printed only with ``--held-out``, after a variant is chosen on dev. The proxy leaves out
what follows relevance in the server (recency, importance, the named speaker, the second hop): a variant that wins
here is then measured end to end (``python -m benchmarks.quality.run``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from benchmarks.ingest.run import cpu_model
from benchmarks.quality.block import LOCOMO_DEV, LOCOMO_HELD_OUT
from benchmarks.quality.calibrate import L2, fit, load_rows, select
from benchmarks.quality.datasets import repo_root


def _pairs(x: np.ndarray, y: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Differences x_pos − x_neg over every (evidence, other) pair of one query, and each pair's weight (1 / the
    query's pairs: each query weighs the same)."""
    diffs, weights = [], []
    for qi in np.unique(q):
        rows = np.flatnonzero(q == qi)
        pos, neg = rows[y[rows] > 0], rows[y[rows] <= 0]
        if len(pos) == 0 or len(neg) == 0:
            continue
        d = (x[pos][:, None, :] - x[neg][None, :, :]).reshape(-1, x.shape[1])
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))
    if not diffs:
        return np.zeros((0, x.shape[1])), np.zeros(0)
    return np.vstack(diffs), np.concatenate(weights)


def fit_pairwise(data: Mapping[str, Mapping[str, np.ndarray]], xkey: str, ykey: str, qkey: str, *,
                 l2: float = L2, steps: int = 50) -> tuple[np.ndarray, float]:
    """The direction by a pairwise logistic loss (no intercept), then a pointwise Platt scale: (coef, intercept)."""
    ds, ws = [], []
    for d in data.values():
        if len(d[xkey]) == 0:
            continue
        diff, w = _pairs(d[xkey], d[ykey], d[qkey])
        if len(diff):
            ds.append(diff)
            ws.append(w / w.sum())   # each data set weighs the same
    diff, w = np.vstack(ds), np.concatenate(ws)
    w = w / w.mean()
    beta = np.zeros(diff.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(diff @ beta, -60, 60)))   # P(the evidence hit ranks above)
        grad = diff.T @ (w * (p - 1.0)) + l2 * beta
        hess = (diff * (w * p * (1 - p))[:, None]).T @ diff + l2 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    score = {name: {xkey: (d[xkey] @ beta)[:, None], ykey: d[ykey]} for name, d in data.items() if len(d[xkey])}
    (a,), b, _ = fit(score, xkey, ykey)
    return a * beta, b


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))


def proxy(rows: Mapping[str, np.ndarray], models: Mapping[str, tuple[np.ndarray, float]]) -> dict[str, float]:
    """Per question of one LoCoMo conversation's rows: candidates by relevance as the server computes it, the share
    of evidence hits in the top 5 and 10 (of those among the candidates), averaged."""
    fx, fy, fq = rows["fx"], rows["fy"], rows["fq"]
    rel = _sigmoid(fx @ models["fused"][0] + models["fused"][1])
    rerank = _sigmoid(rows["rx"] @ models["rerank"][0] + models["rerank"][1])
    starts = {int(qi): int(np.flatnonzero(fq == qi)[0]) for qi in np.unique(fq)}
    rel = rel.copy()
    for r, qi, h in zip(rerank, rows["rq"], rows["rh"], strict=True):
        rel[starts[int(qi)] + int(h)] = r
    at5, at10 = [], []
    for qi in np.unique(fq):
        idx = np.flatnonzero(fq == qi)
        y = fy[idx]
        if y.sum() == 0:
            continue
        order = np.argsort(-rel[idx], kind="stable")
        at5.append(float(y[order[:5]].sum() / y.sum()))
        at10.append(float(y[order[:10]].sum() / y.sum()))
    return {"R@5": round(float(np.mean(at5)), 4), "R@10": round(float(np.mean(at10)), 4), "questions": len(at5)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=Path, required=True,
                        help="rows collected by calibrate.py --rows (with fq, rq, rh)")
    parser.add_argument("--held-out", action="store_true", help="also the held-out conversations (after choosing)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures and both fits here (JSON)")
    args = parser.parse_args(argv)
    rows = load_rows(args.rows)
    data = select(rows, LOCOMO_DEV)
    shipped = json.loads((repo_root() / "server" / "fusion" / "calibration.json").read_text())
    fits = shipped["fits"][shipped["default"]]
    variants = {
        "shipped": {k: (np.array(fits[k]["coef"]), float(fits[k]["intercept"])) for k in ("fused", "rerank")},
        "pointwise refit": {"fused": fit(data, "fx", "fy")[:2], "rerank": fit(data, "rx", "ry")[:2]},
        "pairwise": {"fused": fit_pairwise(data, "fx", "fy", "fq"), "rerank": fit_pairwise(data, "rx", "ry", "rq")},
        "pairwise rerank only": {"fused": fit(data, "fx", "fy")[:2], "rerank": fit_pairwise(data, "rx", "ry", "rq")},
    }
    convs = LOCOMO_DEV + (LOCOMO_HELD_OUT if args.held_out else ())
    out: dict = {"fits": {name: {k: {"coef": [round(float(c), 5) for c in m[k][0]],
                                     "intercept": round(float(m[k][1]), 5)} for k in m}
                          for name, m in variants.items()}, "proxy": {},
                 "meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": cpu_model(),
                          "command": "python -m benchmarks.quality.calibration_rank " + " ".join(sys.argv[1:])}}
    for name, models in variants.items():
        out["proxy"][name] = {c: proxy(rows[f"locomo:{c}"], models) for c in convs}
        for half, names in (("dev", LOCOMO_DEV), ("held_out", LOCOMO_HELD_OUT if args.held_out else ())):
            if not names:
                continue
            parts = [out["proxy"][name][c] for c in names]
            n = sum(p["questions"] for p in parts)
            out["proxy"][name][half] = {m: round(sum(p[m] * p["questions"] for p in parts) / n, 4)
                                        for m in ("R@5", "R@10")}
        halves = {h: out["proxy"][name][h] for h in ("dev", "held_out") if h in out["proxy"][name]}
        print(f"{name:22s}", json.dumps(halves))
    for name, f in out["fits"].items():
        print(f"{name:22s} fused {f['fused']} rerank {f['rerank']}")
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
