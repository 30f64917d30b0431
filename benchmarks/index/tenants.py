"""Many tenants under a memory budget: 1,000 tenants × 1,000 memories in one server whose budget holds
only a fraction of them. Measures the cost of loading (cold: Lucene and FAISS built from the log; warm:
committed Lucene) and evicting a tenant, and search latency under skewed (Zipf) tenant popularity,
split into hits (tenant loaded) and misses (tenant reloaded on demand).

    .venv/bin/python -m benchmarks.index.tenants                       # 1,000 × 1,000, budget 300 MB
    .venv/bin/python -m benchmarks.index.tenants --tenants 100 --budget-mb 30 --requests 500
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.index.data import CACHE, dataset, queries, tenant_name
from benchmarks.index.run import RESULTS, Probe, percentiles, rss_bytes
from benchmarks.serving.run import ServerProcess, load_embedder_for_build
from engram_proto.v1 import service_pb2 as spb

log = logging.getLogger("benchmarks.index.tenants")


def registry_stats(probe: Probe) -> spb.StatsResponse:
    from benchmarks.index.run import META

    return probe.admin.Stats(spb.StatsRequest(), metadata=META)


def zipf_weights(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


def run(*, tenants: int, per_tenant: int, budget_mb: int, requests: int, zipf_s: float, env: dict[str, str],
        embedder: Any) -> dict[str, Any]:
    data_dir = dataset(embedder, tenants=tenants, per_tenant=per_tenant)
    texts, _ = queries(embedder, 300)
    names = [tenant_name(i) for i in range(tenants)]
    work = Path(tempfile.mkdtemp(prefix="ix-tenants-", dir=CACHE))
    out: dict[str, Any] = {"tenants": tenants, "per_tenant": per_tenant, "budget_mb": budget_mb,
                           "zipf_s": zipf_s, "env": env}
    try:
        server = ServerProcess(data_dir, batching=True, env={**env, "ENGRAM_TENANTS__MEMORY_BUDGET_MB": str(budget_mb)},
                               workdir=work)
        server.wait_ready()
        probe = Probe(server)
        peak_used = 0
        # 1. Cold sweep: every tenant once, in order (each load builds Lucene from the log; LRU evicts).
        cold: list[float] = []
        started = time.perf_counter()
        for i, name in enumerate(names):
            ms, _ = probe.search(name, texts[i % len(texts)])
            cold.append(ms)
            if i % 50 == 0:
                peak_used = max(peak_used, registry_stats(probe).used_bytes)
        s = registry_stats(probe)
        out["cold_sweep"] = {"wall_s": time.perf_counter() - started, "latency": percentiles(cold),
                             "loads": s.loads, "evictions": s.evictions,
                             "load_ms_mean": s.load_ms_total / max(1, s.loads),
                             "evict_ms_mean": s.evict_ms_total / max(1, s.evictions),
                             "loaded_after": s.loaded_tenants}
        loads0, evictions0, load_ms0, evict_ms0 = s.loads, s.evictions, s.load_ms_total, s.evict_ms_total
        # 2. Skewed traffic: popular tenants stay loaded, the long tail reloads on demand (warm Lucene).
        rng = np.random.default_rng(0)
        order = rng.permutation(tenants)
        picks = order[rng.choice(tenants, size=requests, p=zipf_weights(tenants, zipf_s))]
        hit: list[float] = []
        miss: list[float] = []
        started = time.perf_counter()
        for j, t in enumerate(picks.tolist()):
            loaded = probe.stats(names[t]).state != "UNLOADED"
            ms, _ = probe.search(names[t], texts[random.Random(j).randrange(len(texts))] + f" #{j}")
            (hit if loaded else miss).append(ms)
            if j % 100 == 0:
                peak_used = max(peak_used, registry_stats(probe).used_bytes)
        s = registry_stats(probe)
        loads, evictions = s.loads - loads0, s.evictions - evictions0
        out["skewed"] = {"requests": requests, "wall_s": time.perf_counter() - started,
                         "all": percentiles(hit + miss), "hits": percentiles(hit) if hit else {},
                         "misses": percentiles(miss) if miss else {}, "hit_rate": len(hit) / requests,
                         "loads": loads, "evictions": evictions,
                         "load_ms_mean": (s.load_ms_total - load_ms0) / max(1, loads),
                         "evict_ms_mean": (s.evict_ms_total - evict_ms0) / max(1, evictions)}
        out["registry"] = {"loaded_tenants": s.loaded_tenants, "used_bytes": s.used_bytes,
                           "peak_used_bytes_sampled": peak_used, "budget_bytes": s.memory_budget_bytes,
                           "all_tenants_estimated_bytes": int(s.used_bytes / max(1, s.loaded_tenants) * tenants),
                           "server_rss_bytes": rss_bytes(server.proc.pid)}
        probe.close()
        server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def markdown(r: dict[str, Any]) -> str:
    c, k, g = r["cold_sweep"], r["skewed"], r["registry"]
    return "\n".join([
        "| tenants × memories | budget | all tenants (est.) | loaded at end | cold load / evict ms (mean) | "
        "cold first-touch p50/p95 ms | skewed p50/p95 ms | hits p95 ms | misses p95 ms (warm reload) | hit rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {r['tenants']:,} × {r['per_tenant']:,} | {g['budget_bytes'] >> 20} MB | "
        f"{g['all_tenants_estimated_bytes'] >> 20} MB | {g['loaded_tenants']} | {c['load_ms_mean']:.0f} / "
        f"{c['evict_ms_mean']:.0f} | {c['latency']['p50_ms']:.0f} / {c['latency']['p95_ms']:.0f} | "
        f"{k['all']['p50_ms']:.1f} / {k['all']['p95_ms']:.1f} | {k['hits'].get('p95_ms', float('nan')):.1f} | "
        f"{k['misses'].get('p95_ms', float('nan')):.1f} | {k['hit_rate']:.2f} |"])


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    labels = ["cold sweep", "skewed: hits", "skewed: misses", "skewed: all"]
    stats = [r["cold_sweep"]["latency"], r["skewed"]["hits"], r["skewed"]["misses"], r["skewed"]["all"]]
    x = np.arange(len(labels))
    ax.bar(x - 0.2, [s.get("p50_ms", 0) for s in stats], 0.4, label="p50")
    ax.bar(x + 0.2, [s.get("p95_ms", 0) for s in stats], 0.4, label="p95")
    ax.set_xticks(x, labels)
    ax.set_ylabel("ms per search")
    ax.set_title(f"{r['tenants']} tenants × {r['per_tenant']} memories, budget {r['budget_mb']} MB")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--per-tenant", type=int, default=1000)
    parser.add_argument("--budget-mb", type=int, default=300)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    env = {"ENGRAM_MODELS__CPU_THREADS": "1", "ENGRAM_MODELS__DEVICE": "cpu", "ENGRAM_LOG_LEVEL": "WARNING"}
    embedder = load_embedder_for_build("cpu")
    result = run(tenants=args.tenants, per_tenant=args.per_tenant, budget_mb=args.budget_mb, requests=args.requests,
                 zipf_s=args.zipf, env=env, embedder=embedder)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tenants.json").write_text(json.dumps(result, indent=1))
    (args.out / "tenants.md").write_text(markdown(result) + "\n")
    plot(result, args.out / "tenants.png")
    print(markdown(result))  # noqa: T201 - a benchmark's report
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
