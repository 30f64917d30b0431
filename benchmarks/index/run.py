"""The index benchmark, one tenant at 10k, 100k and 1M memories: how long the server takes to load and
promote it, RAM per memory, dense recall@10 of the tier it ends on against exact search, dense latency
(the tier's index vs exact flat, side by side), and the whole search through the server without rerank.

    .venv/bin/python -m benchmarks.index.run                    # 10k, 100k, 1M
    .venv/bin/python -m benchmarks.index.run --sizes 10000      # one size

Each size runs a server process on a fresh copy of the cached dataset (cold: WAL replay, Lucene and
FAISS built from the log, promotion in the background), stops it (flush + snapshot), then restarts it
on the same directory (warm: snapshot + committed Lucene). Recall and dense latency are measured in this
process on the very index the server snapshotted. JSON + PNG under benchmarks/results/index/.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import faiss
import grpc
import numpy as np

from benchmarks.index.data import ADMIN_KEY, CACHE, dataset, queries, tenant_name, truth_vectors
from benchmarks.serving.run import ServerProcess, load_embedder_for_build
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc
from server.index.ivf import ivf_from_payload
from server.index.tiers import TierRules
from server.store.snapshot import read_snapshot
from server.tenants.registry import tenant_dirname
from server.tenants.shard import DENSE_SNAPSHOT

log = logging.getLogger("benchmarks.index")
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "index"
META = (("authorization", f"Bearer {ADMIN_KEY}"),)


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    a = np.asarray(samples_ms)
    return {"p50_ms": float(np.percentile(a, 50)), "p95_ms": float(np.percentile(a, 95)),
            "mean_ms": float(a.mean()), "n": len(a)}


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Probe:
    def __init__(self, server: ServerProcess) -> None:
        self.channel = grpc.insecure_channel(server.address)
        self.memory = sgrpc.MemoryServiceStub(self.channel)
        self.admin = sgrpc.AdminServiceStub(self.channel)

    def stats(self, tenant_id: str) -> spb.TenantStats:
        return self.admin.Stats(spb.StatsRequest(tenant_id=tenant_id), metadata=META).tenants[0]

    def search(self, tenant_id: str, text: str, *, timeout_s: float = 120.0) -> tuple[float, pb.QueryResult]:
        t0 = time.perf_counter()
        reply = self.memory.Search(spb.SearchRequest(tenant_id=tenant_id, queries=[pb.SearchQuery(text=text, top_k=10)]),
                                   metadata=META, timeout=timeout_s)
        return (time.perf_counter() - t0) * 1000.0, reply.results[0]

    def wait_settled(self, tenant_id: str, timeout_s: float = 3600) -> spb.TenantStats:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            s = self.stats(tenant_id)
            if s.state == "LOADED":
                return s
            time.sleep(1.0)
        raise TimeoutError(f"{tenant_id} still building after {timeout_s}s")

    def close(self) -> None:
        self.channel.close()


def server_path(probe: Probe, tenant_id: str, texts: list[str]) -> dict[str, Any]:
    for text in texts[:20]:
        probe.search(tenant_id, text + " (warmup)")
    lat: list[float] = []
    stages: dict[str, list[float]] = {"queue_ms": [], "embed_ms": [], "ann_ms": [], "bm25_ms": [], "fusion_ms": [],
                                      "decay_ms": [], "server_total_ms": []}
    for text in texts:
        ms, result = probe.search(tenant_id, text)
        lat.append(ms)
        t = result.timings
        for key, ns in (("queue_ms", t.queue_ns), ("embed_ms", t.embed_ns), ("ann_ms", t.ann_ns),
                        ("bm25_ms", t.bm25_ns), ("fusion_ms", t.fusion_ns), ("decay_ms", t.decay_ns),
                        ("server_total_ms", t.total_ns)):
            stages[key].append(ns / 1e6)
    return {"client": percentiles(lat), **{k: percentiles(v) for k, v in stages.items()}}


def dense_quality(directory: Path, data_dir: Path, qvecs: np.ndarray, *, rules: TierRules) -> dict[str, Any]:
    """Recall@10 of the server's snapshotted index vs exact search, and single-query latency of both."""
    ids, vectors = truth_vectors(data_dir)
    exact = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    exact.add_with_ids(vectors, ids)
    _, truth = exact.search(qvecs, 10)
    out: dict[str, Any] = {"exact_flat": percentiles(_single_query_ms(exact.search, qvecs))}
    snap = read_snapshot(directory / DENSE_SNAPSHOT)
    if snap is None:
        out["tier"] = "flat"
        out["recall_at_10"] = 1.0
        return out
    header, payload = snap
    ivf = ivf_from_payload(payload, dim=vectors.shape[1], rules=rules, description=header["description"])
    out["tier"] = "ivf"
    out["index"] = header["description"]
    out["nprobe_sweep"] = {}
    for nprobe in sorted({16, 32, rules.nprobe, 128, 256}):
        ivf.set_search_params(nprobe=nprobe, ef_search=max(rules.ef_search, 2 * nprobe))
        _, got = ivf.search(qvecs, 10)
        out["nprobe_sweep"][nprobe] = {"recall_at_10": _recall(got, truth),
                                       **percentiles(_single_query_ms(ivf.search, qvecs))}
    ivf.set_search_params(nprobe=rules.nprobe, ef_search=rules.ef_search)
    _, got = ivf.search(qvecs, 10)
    out["recall_at_10"] = _recall(got, truth)
    out["ivf"] = percentiles(_single_query_ms(ivf.search, qvecs))
    out["ivf_ram_bytes_per_memory"] = ivf.ram_bytes() / len(ivf)
    return out


def _recall(got: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(g) & set(t)) / 10 for g, t in zip(got.tolist(), truth.tolist(), strict=True)]))


def _single_query_ms(search: Any, qvecs: np.ndarray) -> list[float]:
    out = []
    for q in qvecs:
        t0 = time.perf_counter()
        search(q[None, :], 10)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def bench_size(n: int, *, embedder: Any, env: dict[str, str], rules: TierRules, n_queries: int) -> dict[str, Any]:
    data_dir = dataset(embedder, tenants=1, per_tenant=n)
    tenant = tenant_name(0)
    texts, qvecs = queries(embedder, n_queries)
    work = Path(tempfile.mkdtemp(prefix=f"ix-{n}-", dir=CACHE))
    result: dict[str, Any] = {"memories": n, "promote_at": rules.promote_at}
    try:
        cold = ServerProcess(data_dir, batching=True, env=env, workdir=work / "cold")
        cold.wait_ready()
        probe = Probe(cold)
        base_rss = rss_bytes(cold.proc.pid)
        t0 = time.perf_counter()
        probe.search(tenant, texts[0], timeout_s=3600)   # this one loads the tenant
        first_ms = (time.perf_counter() - t0) * 1000.0
        loaded = probe.stats(tenant)
        settled = probe.wait_settled(tenant)
        result["cold"] = {"first_search_ms": first_ms, "load_ms": loaded.load_ms,
                          "promotion_s": time.perf_counter() - t0 - first_ms / 1000.0 if settled.dense_tier == "ivf"
                          else 0.0, "tier": settled.dense_tier, "index": settled.dense_index,
                          "rss_delta_bytes_per_memory": (rss_bytes(cold.proc.pid) - base_rss) / n}
        result["cold"]["search"] = server_path(probe, tenant, texts)
        probe.close()
        stop_started = time.perf_counter()
        cold.stop()
        result["cold"]["stop_s"] = time.perf_counter() - stop_started
        tenant_dir = cold.dir / "tenants" / tenant_dirname(tenant)
        result["dense"] = dense_quality(tenant_dir, data_dir, qvecs, rules=rules)

        warm = ServerProcess(cold.dir, batching=True, env=env, workdir=work / "warm")
        shutil.rmtree(cold.dir)
        warm.wait_ready()
        probe = Probe(warm)
        base_rss = rss_bytes(warm.proc.pid)
        t0 = time.perf_counter()
        probe.search(tenant, texts[0], timeout_s=3600)   # this one loads the tenant
        first_ms = (time.perf_counter() - t0) * 1000.0
        stats = probe.stats(tenant)
        result["warm"] = {"first_search_ms": first_ms, "load_ms": stats.load_ms, "state": stats.state,
                          "tier": stats.dense_tier, "estimated_ram_bytes_per_memory": stats.ram_bytes / n,
                          "rss_delta_bytes_per_memory": (rss_bytes(warm.proc.pid) - base_rss) / n}
        result["warm"]["search"] = server_path(probe, tenant, texts)
        probe.close()
        warm.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("n=%d: %s", n, json.dumps(result, indent=1))
    return result


def markdown(results: dict[str, Any]) -> str:
    lines = ["| memories | tier (index) | cold load s | promotion s | warm load s | RAM B/memory (RSS) | "
             "recall@10 | dense p50/p95 ms (tier) | exact flat p50/p95 ms | server p50/p95 ms (after promotion) | "
             "server p50/p95 ms (after restart) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results["sizes"]:
        d, c, w = r["dense"], r["cold"], r["warm"]
        tier_lat = d.get("ivf", d["exact_flat"])
        lines.append(
            f"| {r['memories']:,} | {c['tier']} ({c['index']}) | {c['load_ms'] / 1000:.1f} | {c['promotion_s']:.1f} | "
            f"{w['load_ms'] / 1000:.1f} | {w['rss_delta_bytes_per_memory']:.0f} | {d['recall_at_10']:.3f} | "
            f"{tier_lat['p50_ms']:.2f} / {tier_lat['p95_ms']:.2f} | {d['exact_flat']['p50_ms']:.2f} / "
            f"{d['exact_flat']['p95_ms']:.2f} | {c['search']['client']['p50_ms']:.1f} / "
            f"{c['search']['client']['p95_ms']:.1f} | {w['search']['client']['p50_ms']:.1f} / "
            f"{w['search']['client']['p95_ms']:.1f} |")
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["memories"] for r in results["sizes"]]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(sizes, [r["dense"]["exact_flat"]["p95_ms"] for r in results["sizes"]], "o-", label="dense exact flat p95")
    a.plot(sizes, [r["dense"].get("ivf", r["dense"]["exact_flat"])["p95_ms"] for r in results["sizes"]], "o-",
           label="dense tier in use p95")
    a.plot(sizes, [r["cold"]["search"]["client"]["p95_ms"] for r in results["sizes"]], "o-",
           label="whole search via server p95 (after promotion)")
    a.plot(sizes, [r["warm"]["search"]["client"]["p95_ms"] for r in results["sizes"]], "o-",
           label="whole search via server p95 (after restart)")
    a.axvline(results["promote_at"], color="grey", ls="--", label="promote_at")
    a.axhline(50, color="red", ls=":", label="50 ms budget")
    a.set_xscale("log"), a.set_yscale("log"), a.set_xlabel("memories in the tenant"), a.set_ylabel("ms")
    a.legend(fontsize=8)
    b.bar([f"{s:,}" for s in sizes], [r["warm"]["rss_delta_bytes_per_memory"] for r in results["sizes"]])
    b.set_ylabel("server RSS bytes per memory (warm)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cpu-threads", type=int, default=1, help="server torch/FAISS threads (models.cpu_threads)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    rules = TierRules()
    env = {"ENGRAM_MODELS__CPU_THREADS": str(args.cpu_threads), "ENGRAM_MODELS__DEVICE": "cpu",
           "ENGRAM_JVM_HEAP_MB": "4096", "ENGRAM_LOG_LEVEL": "INFO"}
    embedder = load_embedder_for_build("cpu")
    faiss.omp_set_num_threads(1)   # single-query latency: OpenMP threads only spin on a loaded 2-core box
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
                               "promote_at": rules.promote_at, "codes": rules.codes, "nprobe": rules.nprobe,
                               "ef_search": rules.ef_search, "env": env, "sizes": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        results["sizes"].append(bench_size(n, embedder=embedder, env=env, rules=rules, n_queries=args.queries))
        (args.out / "single_tenant.json").write_text(json.dumps(results, indent=1))
    (args.out / "single_tenant.md").write_text(markdown(results) + "\n")
    plot(results, args.out / "single_tenant.png")
    print(markdown(results))  # noqa: T201 - a benchmark's report
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
