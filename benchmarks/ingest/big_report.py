"""The report of a big build (benchmarks.ingest.big): its rate and what the tier builds did to the Writes.

Reads ``DIR/writes.csv`` (each Write: when it ended, its latency), ``DIR/stats.csv`` (the tenant every 5 s) and
``DIR/gate.log`` (when benchmarks/ingest/gate.sh paused and resumed the build). Time the build spent paused is
not the build's: the rate is over the time it ran, and a Write that was in flight across a pause is left out of
the latencies. A dense index build (flat -> IVF-HNSW, then larger rebuilds) shows as the tenant's state BUILDING;
the Writes that ended while one ran are compared with the others. Writes ``big_<name>.json`` and ``.png`` under
benchmarks/results/ingest/. :func:`report_import` does the same for run.py part c's import on a timed server.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "ingest"


def paused_spans(gate_log: Path, *, day: dt.date) -> list[tuple[float, float]]:
    """(start, end) epoch seconds of the pauses gate.sh logged ("HH:MM:SS paused" / "HH:MM:SS resumed", UTC), the
    first line on ``day``; a clock earlier than the line before it is on the next day (a build runs past midnight)."""
    spans: list[tuple[float, float]] = []
    start: float | None = None
    if not gate_log.exists():
        return spans
    last = 0.0
    for line in gate_log.read_text().splitlines():
        clock, _, what = line.partition(" ")
        try:
            t = dt.datetime.combine(day, dt.time.fromisoformat(clock), tzinfo=dt.timezone.utc).timestamp()
        except ValueError:
            continue
        if t < last:   # past midnight
            day += dt.timedelta(days=1)
            t += 86_400.0
        last = t
        if what == "paused" and start is None:
            start = t
        elif what == "resumed" and start is not None:
            spans.append((start, t))
            start = None
    if start is not None:
        spans.append((start, time.time()))
    return spans


def _overlaps(a: float, b: float, spans: list[tuple[float, float]]) -> bool:
    return any(a < e + 1 and b > s - 1 for s, e in spans)   # 1 s slack: the gate looks every 0.5 s


def _stats(values: np.ndarray) -> dict[str, float]:
    if not len(values):
        return {"writes": 0}
    return {"writes": int(len(values)), "p50_s": round(float(np.percentile(values, 50)), 3),
            "p95_s": round(float(np.percentile(values, 95)), 3), "max_s": round(float(values.max()), 3)}


def building_spans(stats: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Runs of BUILDING in the tenant's stats: start, end (epoch s), memories at the start, the index after."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for row in stats:
        t = float(row["wall"])
        if row["state"] == "BUILDING" and current is None:
            current = {"start": t, "memories_at_start": int(row["memories"]), "index_before": row["dense_index"]}
        elif row["state"] != "BUILDING" and current is not None:
            current.update(end=t, memories_at_end=int(row["memories"]), index_after=row["dense_index"])
            out.append(current)
            current = None
    if current is not None:
        current.update(end=float(stats[-1]["wall"]), memories_at_end=int(stats[-1]["memories"]), index_after="")
        out.append(current)
    return out


def report(root: Path, *, name: str, out: Path = RESULTS) -> int:
    """The report of a big.py build directory."""
    with (root / "writes.csv").open() as f:
        writes = [(float(r["wall"]), float(r["seconds"]), int(r["memories"])) for r in csv.DictReader(f)]
    with (root / "stats.csv").open() as f:
        stats = list(csv.DictReader(f))
    if not writes:
        raise SystemExit(f"no Writes in {root / 'writes.csv'}")
    day = dt.datetime.fromtimestamp(min(w[0] for w in writes), dt.timezone.utc).date()
    return summarise(writes, stats, paused_spans(root / "gate.log", day=day), name=name, out=out)


def report_import(path: Path, *, name: str, batch: int = 128, out: Path = RESULTS) -> int:
    """The same report for run.py part c's import on a timed server (``--stages``): its Writes and Stats. The
    resumed run's first Writes are answered from the server's record in milliseconds: those under 50 ms are left
    out (no Write of 128 that embeds is that fast on a CPU)."""
    c = json.loads(path.read_text())["c"]
    writes = [(float(end), float(seconds), batch) for end, seconds in c["writes"] if seconds >= 0.05]
    return summarise(writes, [{k: str(v) for k, v in row.items()} for row in c["tenant_stats"]], [], name=name, out=out)


def summarise(writes: list[tuple[float, float, int]], stats: list[dict[str, str]], pauses: list[tuple[float, float]],
              *, name: str, out: Path) -> int:
    """``writes``: (end, seconds, memories) per Write; ``stats``: the tenant's rows (wall, memories, state,
    dense_index); ``pauses``: (start, end) spans the build was stopped."""
    writes = sorted(writes)
    end = np.array([w[0] for w in writes])
    latency = np.array([w[1] for w in writes])
    sizes = np.array([w[2] for w in writes])
    clean = np.array([not _overlaps(e - s, e, pauses) for e, s in zip(end, latency, strict=True)])
    first_start = end[0] - latency[0]
    paused_s = sum(max(0.0, min(e, end[-1]) - max(s, first_start)) for s, e in pauses)
    ran_s = end[-1] - first_start - paused_s
    builds = building_spans(stats)
    during = np.zeros(len(writes), dtype=bool)
    for b in builds:
        during |= (end >= b["start"]) & (end - latency <= b["end"])
    memories = int(stats[-1]["memories"]) if stats else int(sizes.sum())
    result = {
        "name": name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "writes": len(writes), "memories_written": int(sizes.sum()), "tenant_memories": memories,
        "dense_index": stats[-1]["dense_index"] if stats else "", "wall_s": round(float(end[-1] - first_start), 1),
        "paused_s": round(paused_s, 1), "ran_s": round(float(ran_s), 1),
        "rate_while_running": round(float(sizes.sum() / max(ran_s, 1e-9)), 1),
        "write_latency_all": _stats(latency[clean]),
        "write_latency_during_index_builds": _stats(latency[clean & during]),
        "write_latency_outside_index_builds": _stats(latency[clean & ~during]),
        "index_builds": [{**b, "seconds": round(b["end"] - b["start"], 1)} for b in builds],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"big_{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(end - latency / 2, latency, np.cumsum(sizes), clean, builds, out / f"big_{name}.png", title=name)
    print(json.dumps(result, indent=2))
    return 0


def plot(mid: np.ndarray, latency: np.ndarray, cumulative: np.ndarray, clean: np.ndarray,
         builds: list[dict[str, Any]], path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    ax.scatter(cumulative[clean], latency[clean], s=2, label="Write of 128 (latency)")
    for i, b in enumerate(builds):
        ax.axvspan(b["memories_at_start"], max(b["memories_at_end"], b["memories_at_start"] + 1), color="orange",
                   alpha=0.3, label="dense index build (BUILDING)" if i == 0 else None)
    ax.set_xlabel("memories in the tenant")
    ax.set_ylabel("Write latency (s)")
    ax.set_yscale("log")
    ax.set_title(f"big build {title}: Writes around the flat -> IVF-HNSW builds")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
