"""Fits the salience weights (server/hygiene/salience.json) on the LoCoMo dev conversations: a turn named in
some question's evidence is a positive. Logistic regression (L2, Newton steps) on the features of
``server.hygiene.salience.features``; reports the leave-one-conversation-out AUC so the fit is judged on
conversations it did not see. Run: ``nice -n 10 .venv/bin/python -m benchmarks.hygiene.fit_salience [--write]``."""

from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks.quality.datasets import load_locomo
from server.hygiene.salience import BUNDLED_WEIGHTS, FEATURES, features


def fit(x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, steps: int = 50) -> np.ndarray:
    w = np.zeros(x.shape[1])
    reg = l2 * np.eye(x.shape[1])
    reg[0, 0] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        grad = x.T @ (p - y) + reg @ w
        hess = (x * (p * (1 - p))[:, None]).T @ x + reg
        w -= np.linalg.solve(hess, grad)
    return w


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = y == 1
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))


def dataset() -> tuple[list[np.ndarray], list[np.ndarray]]:
    xs, ys = [], []
    for conv in load_locomo():
        evidence = {d for q in conv.questions for d in q.evidence}
        xs.append(np.array([features(f"{t.speaker}: {t.text}") for t in conv.turns]))
        ys.append(np.array([t.id in evidence for t in conv.turns], dtype=float))
    return xs, ys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="write server/hygiene/salience.json")
    args = parser.parse_args()
    xs, ys = dataset()
    held_out = []
    for i in range(len(xs)):
        w = fit(np.vstack([x for j, x in enumerate(xs) if j != i]), np.concatenate([y for j, y in enumerate(ys) if j != i]))
        held_out.append(auc(xs[i] @ w, ys[i]))
    x, y = np.vstack(xs), np.concatenate(ys)
    w = fit(x, y)
    report = {"features": list(FEATURES), "weights": [round(float(v), 4) for v in w],
              "source": "LoCoMo dev (5 conversations): evidence turns vs the rest, benchmarks/hygiene/fit_salience.py",
              "turns": int(len(y)), "positives": int(y.sum()), "auc_train": round(auc(x @ w, y), 4),
              "auc_leave_one_conversation_out": [round(a, 4) for a in held_out]}
    print(json.dumps(report, indent=1))
    if args.write:
        BUNDLED_WEIGHTS.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
