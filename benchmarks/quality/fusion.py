"""Offline fusion for tuning: the server's RRF (``server.fusion.rrf``) applied to the dense and BM25
lists the server returned, so a grid of k and per-list weights costs no further server calls.

With decay and importance off, the server's hybrid order is exactly this fusion of its two lists
(``check`` in run.py compares them), so a setting chosen here is what the server does once it is the
default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.quality.datasets import evaluate
from server.fusion.rrf import rrf

Run = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Setting:
    k: float
    dense_weight: float
    lexical_weight: float = 1.0


def fuse(dense: Run, lexical: Run, setting: Setting, *, dense_scale: Callable[[str], float] | None = None,
         depth: int = 100) -> dict[str, list[str]]:
    """RRF of the two runs per query; ``dense_scale(qid)`` multiplies the dense weight (e.g. CJK queries)."""
    out: dict[str, list[str]] = {}
    for qid in set(dense) | set(lexical):
        d, lx = list(dense.get(qid, ())), list(lexical.get(qid, ()))
        names = list(dict.fromkeys(d + lx))
        index = {name: i for i, name in enumerate(names)}
        weight = setting.dense_weight * (dense_scale(qid) if dense_scale else 1.0)
        _, ids = rrf([np.asarray([index[n] for n in d], dtype=np.int64),
                      np.asarray([index[n] for n in lx], dtype=np.int64)],
                     k=setting.k, weights=[weight, setting.lexical_weight])
        out[qid] = [names[i] for i in ids.tolist()[:depth]]
    return out


def grid(dense: Run, lexical: Run, qrels: Mapping[str, Mapping[str, int]], settings: Iterable[Setting], *,
         metric: str = "ndcg@10", dense_scale: Callable[[str], float] | None = None,
         query_ids: Iterable[str] | None = None) -> list[tuple[Setting, float]]:
    """Each setting with its mean ``metric``, best first (ties: the earlier setting)."""
    ids = list(query_ids) if query_ids is not None else None
    scored = [(s, evaluate(fuse(dense, lexical, s, dense_scale=dense_scale), qrels, ks=(5, 10, 100),
                           query_ids=ids)[metric]) for s in settings]
    return sorted(scored, key=lambda p: -p[1])


def settings_grid(ks: Sequence[float] = (10, 20, 30, 45, 60, 90),
                  dense_weights: Sequence[float] = (0.5, 0.7, 0.85, 1.0, 1.2, 1.5, 2.0)) -> list[Setting]:
    return [Setting(k=k, dense_weight=w) for k in ks for w in dense_weights]
