"""The data behind the console's server charts: recency factor curves per memory type from the running
config, computed by the ranking kernel's own NumPy reference (so the curve is the function searches use),
and the stage latencies of recent searches from the server's metrics (``Metrics.recent``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kernels.decay import decay_rank
from server.config import ScoringConfig
from server.domain import MemoryType
from server.engine.ranking import DECAY_FLOOR, IMPORTANCE_WEIGHT, RECENCY_WEIGHT, TEMPORAL_BOOST
from server.metrics import STAGES

DAY_S = 86400.0
CURVE_POINTS = 121


def recency_curves(scoring: ScoringConfig, *, points: int = CURVE_POINTS) -> dict[str, Any]:
    """Recency factor against age for each memory type (relevance 1, importance weight 0), over ages up to
    three of the longest finite half-life (at least a week), plus the config values they came from."""
    half_lives = {t.name: float(getattr(scoring, f"{t.name.lower()}_half_life_s")) for t in MemoryType}
    longest = max([h for h in half_lives.values() if h > 0] or [DAY_S])
    ages = np.linspace(0.0, max(7 * DAY_S, 3 * longest), points, dtype=np.float64)
    curves = {}
    for name, half_life in half_lives.items():
        ranked = decay_rank(np.ones(points), ages, np.full(points, half_life), np.ones(points),
                            np.zeros(points, dtype=bool), np.array([0, points]), top_k=1, importance_weight=0.0,
                            decay_floor=DECAY_FLOOR, recency_weight=RECENCY_WEIGHT)
        factor = getattr(ranked, "recency", ranked.decay)
        curves[name] = [round(float(v), 6) for v in np.asarray(factor)]
    return {"ages_s": [float(a) for a in ages], "curves": curves, "half_life_s": half_lives,
            "scoring": {**dataclasses.asdict(scoring), "recency_weight": RECENCY_WEIGHT,
                        "importance_weight": IMPORTANCE_WEIGHT, "decay_floor": DECAY_FLOOR,
                        "temporal_boost": TEMPORAL_BOOST}}


def stage_latencies(recent: Iterable[tuple[int, Mapping[str, int], int]], *, limit: int = 100) -> dict[str, Any]:
    """The last ``limit`` queries' stage times in ms (oldest first) and p50/p95 per stage over them."""
    rows = list(recent)[-limit:]
    stages = list(STAGES)
    series = {s: [round(t.get(s, 0) / 1e6, 3) for _, t, _ in rows] for s in stages}
    summary = {s: {"p50_ms": round(float(np.percentile(v, 50)), 3), "p95_ms": round(float(np.percentile(v, 95)), 3),
                   "mean_ms": round(float(np.mean(v)), 3)} for s, v in series.items() if v}
    return {"stages": stages, "at_ms": [at for at, _, _ in rows], "batch_size": [b for _, _, b in rows],
            "series_ms": series, "summary": summary}
