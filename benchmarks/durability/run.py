"""``make bench-durability``: log bytes, audit bytes and restart time against operations, before and after
automatic compaction and audit retention, on the same workload (benchmarks/durability/workload.py).

Variants, each a fresh in-process server on its own data dir, the same workload and cycles:
  before           compaction off (storage.compact_ratio 1e9) and no audit cap: what engram did before #22
  after            the defaults (storage.compact_ratio 2, compact_min_mb 4; audit 90 days / 1024 MB)
  after_small      storage.compact_min_mb 0.5 and memory.audit_max_mb 1: the same mechanisms at thresholds a
                   short run crosses many times (time is compressed: the 90-day audit window never passes in
                   a benchmark, so the size cap shows the bound)
The default 600 cycles (264k operations) take the log past the 4 MiB minimum three times. Writes JSON and a
PNG under benchmarks/results/durability/.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.durability.workload import Cycle, Run, cycle, measure

OUT = Path(__file__).resolve().parents[1] / "results" / "durability"
VARIANTS: dict[str, dict[str, Any]] = {
    "before": {"storage": {"compact_ratio": 1e9}, "memory": {"audit_max_mb": 0, "audit_retention_days": 0}},
    "after": {},
    "after_small": {"storage": {"compact_min_mb": 0.5}, "memory": {"audit_max_mb": 1}},
}


def run_variant(name: str, overrides: dict[str, Any], *, cycles: int, every: int, embedder: Any) -> list[dict]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from support import start_server   # the in-process server the integration tests use (port 0)

    with tempfile.TemporaryDirectory(prefix=f"durability-{name}-") as tmp:
        running = start_server(Path(tmp) / "data", embedder=embedder, lucene_commit_interval_s=0.5,
                               storage={"min_free_mb": 0, **overrides.get("storage", {})},
                               memory=overrides.get("memory", {}))
        try:
            client = running.client()
            run = Run(tenant="bench/durability")
            client.create_tenant(run.tenant)
            points = []
            started = time.perf_counter()
            for i in range(1, cycles + 1):
                cycle(client, run, Cycle())
                if i % every == 0:
                    point = running.call(_measure_async(running.app, run), timeout=300)
                    point["elapsed_s"] = time.perf_counter() - started
                    points.append(point)
                    print(f"{name:16s} ops {point['operations']:>8d}  log {point['log_bytes'] / 1e6:7.2f} MB  "
                          f"audit {point['audit_bytes'] / 1e6:7.2f} MB  restart {point['restart_ms']:7.1f} ms", flush=True)
            return points
        finally:
            running.stop()


async def _measure_async(app: Any, run: Run) -> dict:
    import asyncio

    return await asyncio.get_running_loop().run_in_executor(app.engine.write_pool, measure, app, run)


def plot(results: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, points in results.items():
        ops = [p["operations"] / 1000 for p in points]
        axes[0].plot(ops, [p["log_bytes"] / 1e6 for p in points], marker=".", label=name)
        axes[1].plot(ops, [p["audit_bytes"] / 1e6 for p in points], marker=".", label=name)
        axes[2].plot(ops, [p["restart_ms"] for p in points], marker=".", label=name)
    for ax, title in zip(axes, ("memory log (MB)", "audit segments (MB)", "restart: tenant load (ms)"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("operations (thousands)")
        ax.grid(alpha=0.3)
        ax.legend()
    c = Cycle()
    fig.suptitle(f"one tenant, {c.live} live memories; per cycle: {c.writes} writes, {c.searches} searches, "
                 f"{c.touches} touches x {c.touch_ids} ids, {c.writes} deletes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=600)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    from server import lexical
    from server.app import load_embedder
    from server.config import load_config

    lexical.start(heap_mb=1024)
    embedder = load_embedder(load_config(env={}), "cpu")
    embedder.warmup()
    results = {name: run_variant(name, VARIANTS[name], cycles=args.cycles, every=args.every, embedder=embedder)
               for name in args.variants.split(",")}
    OUT.mkdir(parents=True, exist_ok=True)
    report = {"workload": Cycle().__dict__, "cycles": args.cycles, "embedder": embedder.name,
              "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores", "variants": VARIANTS,
              "results": results}
    (OUT / "durability.json").write_text(json.dumps(report, indent=1))
    plot(results, OUT / "durability.png")
    print(f"wrote {OUT / 'durability.json'} and durability.png")


if __name__ == "__main__":
    main()
