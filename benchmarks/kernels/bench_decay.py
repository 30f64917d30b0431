"""Micro benchmark: decay re-ranking, NumPy reference vs CuPy (when present), side by side.

    python -m benchmarks.kernels.bench_decay [--repeats 20] [--out benchmarks/results/kernels]

Writes ``decay.json``: one row per (variant, queries, candidates per query, top_k) with median and
p90 wall time in microseconds. CuPy timings include host↔device transfers (the ranker returns NumPy).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kernels import cuda_available
from kernels.decay import DecayRanker
from kernels.decay import decay_rank as numpy_decay_rank

logger = logging.getLogger(__name__)

SHAPES = [(1, 100, 10), (16, 200, 20), (64, 1000, 100), (256, 1000, 100)]  # (queries, per query, top_k)


def make_inputs(queries: int, per_query: int, seed: int = 0) -> tuple[Any, ...]:
    rng = np.random.default_rng(seed)
    n = queries * per_query
    offsets = np.arange(0, n + 1, per_query, dtype=np.int64)
    half_life = rng.uniform(3600, 90 * 86400, n).astype(np.float32)
    half_life[rng.random(n) < 0.1] = np.inf
    return (
        rng.random(n, dtype=np.float32),
        rng.uniform(0, 365 * 86400, n).astype(np.float32),
        half_life,
        rng.random(n, dtype=np.float32),
        rng.random(n) < 0.05,
        offsets,
    )


def time_us(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    fn()  # warm: compile / allocate
    samples = []
    for _ in range(repeats):
        started = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - started) / 1e3)
    return float(np.median(samples)), float(np.percentile(samples, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/kernels"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    variants: dict[str, DecayRanker] = {"numpy": numpy_decay_rank}
    if cuda_available():
        from kernels.decay_cupy import decay_rank as cupy_decay_rank

        variants["cupy"] = cupy_decay_rank

    rows = []
    for queries, per_query, top_k in SHAPES:
        inputs = make_inputs(queries, per_query)
        for variant, ranker in variants.items():
            median_us, p90_us = time_us(
                lambda: ranker(*inputs, top_k=top_k, importance_weight=0.3), args.repeats
            )
            rows.append({
                "variant": variant, "queries": queries, "per_query": per_query, "top_k": top_k,
                "median_us": round(median_us, 1), "p90_us": round(p90_us, 1),
            })
            logger.info("%-6s q=%-4d per_query=%-5d top_k=%-4d median %10.1f us  p90 %10.1f us",
                        variant, queries, per_query, top_k, median_us, p90_us)

    args.out.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "decay_rank", "machine": platform.platform(), "rows": rows}
    (args.out / "decay.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    logger.info("wrote %s", args.out / "decay.json")


if __name__ == "__main__":
    main()
