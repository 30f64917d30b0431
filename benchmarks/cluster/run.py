"""The cluster benchmark: a single node vs engram on Ray on this machine, side by side.

Two servers run at once from the same driver: ``engram serve`` (a single node, local WAL with fsync) and
``engram serve --ray --address <this driver's Ray>`` (the edge; two TenantShard replicas and one Encoder
replica on a local Ray; every tenant log in a SeaweedFS ``weed mini`` bucket). Both get the same memories
through the same Write calls, then:

- search: closed-loop clients (benchmarks/serving's load generator and queries) at each level, the two
  servers measured back to back per level (single, then Ray);
- write acknowledgement: one-memory Writes from 1 and 8 clients against each and against a third server, a
  single node whose logs are in the same bucket (Writes only: the same durability as Ray's, so what Ray adds
  over it is its hops, and what it adds over the local single node is the bucket's PUT), and group commits of
  one memory into a TenantStore on the local log (fsync) vs the object log (a conditional PUT), interleaved;
- tenants per replica: where the ring places 1,000 tenant ids, what each replica holds (RAM per tenant), and
  what loading one costs: every shard replica SIGKILLed, then each tenant's first search (take the log over,
  replay it from the bucket, rebuild the indexes) vs the next; the single node restarted for the same;
- recovery after a replica kill under writes: tests/integration/test_cluster.py's measurement
  (benchmarks/results/cluster/replica_kills.json), summarised.

    .venv/bin/python -m benchmarks.cluster.run --lock /tmp/lead/cpu.lock     # ~10 min on 2 cores
    .venv/bin/python -m benchmarks.cluster.run --replot

``--lock``: a lock file held shared while the servers start and take their data, exclusive while anything is
timed (other processes' heavy work holds it shared). Results: ``cluster.json``, ``cluster.png`` and ``cluster.md`` under benchmarks/results/cluster/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from benchmarks.cluster.stack import BUCKET, RESULTS, S3_ENV, bucket
from benchmarks.cluster.writes import run_writes, store_commits
from benchmarks.serving.build import ADMIN_KEY, POOL_SIZE, tenant_name
from benchmarks.serving.corpus import memories, query_texts, sentence_pool
from benchmarks.serving.load import run_load, touch_tenants
from benchmarks.serving.run import ROOT, ServerProcess, free_port
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc

log = logging.getLogger("benchmarks.cluster")
SIDES = ("single", "ray")
WRITE_BATCH = 64


class EngramProcess(ServerProcess):
    """``engram serve`` (or ``engram serve --ray --address ...``) in a child process on its own data dir."""

    def __init__(self, name: str, *, workdir: Path, env: dict[str, str], ray_address: str = "", ray_local: bool = False,
                 root: Path = ROOT) -> None:
        """``ray_address``: the edge joins that Ray; ``ray_local``: it starts its own. ``root``: the checkout it
        runs from (on its ``PYTHONPATH``, which every worker of a Ray it starts inherits)."""
        self.port = free_port()
        self.root = root
        self.dir = workdir / name
        self.log_path = workdir / f"{name}.log"
        self.args = [sys.executable, "-m", "engram_cli", "serve", "--listen", self.address, "--data-dir", str(self.dir),
                     *(["--ray", "--address", ray_address] if ray_address else ["--ray"] if ray_local else [])]
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}, "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1", "ENGRAM_ADMIN_KEY": ADMIN_KEY, "ENGRAM_LOG_LEVEL": "WARNING",
                    "ENGRAM_BATCHING__QUERY_CACHE_TTL_MS": "0",   # every query is embedded
                    "ENGRAM_MODELS__RERANKER": "", **({"PYTHONPATH": str(root)} if root != ROOT else {}), **env}
        self.start()

    def start(self) -> None:
        import subprocess

        self.proc = subprocess.Popen(self.args, cwd=self.root, env=self.env, stdout=self.log_path.open("a"),
                                     stderr=subprocess.STDOUT)


def _stub(address: str) -> tuple[grpc.Channel, Any, Any]:
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    return channel, sgrpc.MemoryServiceStub(channel), sgrpc.AdminServiceStub(channel)


METADATA = (("authorization", f"Bearer {ADMIN_KEY}"),)


def seed(address: str, *, tenants: int, per_tenant: int) -> dict[str, Any]:
    """Creates the tenants and writes the same memories (benchmarks/serving's corpus) in Writes of 64."""
    pool = sentence_pool(POOL_SIZE)
    channel, memory, admin = _stub(address)
    started = time.perf_counter()
    merged = 0
    with channel:
        for t in range(tenants + 1):   # the last one takes the write-latency runs
            admin.CreateTenant(spb.CreateTenantRequest(tenant_id=tenant_name(t)), metadata=METADATA, timeout=120)
        for t in range(tenants):
            texts = [text for text, _ in memories(per_tenant, pool, seed=1000 + t)]
            for i in range(0, len(texts), WRITE_BATCH):
                reply = memory.Write(spb.WriteRequest(tenant_id=tenant_name(t), memories=[
                    pb.MemoryInput(content=c) for c in texts[i:i + WRITE_BATCH]]), metadata=METADATA, timeout=600)
                merged += sum(r.outcome == spb.WRITE_OUTCOME_MERGED for r in reply.results)
    seconds = time.perf_counter() - started
    return {"memories": tenants * per_tenant, "merged": merged, "seconds": round(seconds, 1),
            "memories_per_s": round(tenants * per_tenant / seconds, 1)}


def _summary(latencies_ms: list[float]) -> dict[str, float]:
    lat = np.asarray(latencies_ms)
    return {"n": len(lat), "p50_ms": round(float(np.percentile(lat, 50)), 2),
            "p95_ms": round(float(np.percentile(lat, 95)), 2), "mean_ms": round(float(lat.mean()), 2)}


def _first_searches(address: str, names: list[str], query: str) -> list[dict[str, Any]]:
    """Per tenant: the first search (loads it) and the next one, in milliseconds."""
    channel, memory, _ = _stub(address)
    out = []
    with channel:
        for name in names:
            row: dict[str, Any] = {"tenant": name}
            for label in ("first_ms", "next_ms"):
                started = time.perf_counter()
                memory.Search(spb.SearchRequest(tenant_id=name, queries=[pb.SearchQuery(text=query, top_k=10)]),
                              metadata=METADATA, timeout=300)
                row[label] = round((time.perf_counter() - started) * 1000, 1)
            out.append(row)
    return out


def _shards() -> Any:
    from ray import serve

    return serve.get_app_handle("engram")


def _live_replicas(*, probes: int = 16) -> dict[str, dict[str, Any]]:
    handle = _shards()
    replies = [handle.options(session_id=f"probe-{i}").where.remote() for i in range(probes)]
    return {w["replica"]: w for w in (r.result(timeout_s=30) for r in replies)}


def _wait_replicas(n: int, *, gone: set[str], timeout_s: float = 300) -> float:
    """Seconds until ``n`` replicas, none of ``gone``, answer calls routed over the ring."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        try:
            seen = set(_live_replicas())
        except Exception:  # noqa: BLE001 - a probe routed to a dead replica before the ring moved
            seen = set()
        if len(seen) >= n and not seen & gone:
            return time.monotonic() - started
        time.sleep(0.2)
    raise TimeoutError(f"the ring did not get back to {n} live replicas")


def tenants_per_replica(names: list[str], *, ids: int = 1000) -> dict[str, Any]:
    """Where the ring puts ``ids`` tenant ids, and what each replica holds of the benchmark's tenants."""
    handle = _shards()
    placed = [handle.options(session_id=f"tenant-{i:05d}").where.remote() for i in range(ids)]
    counts: dict[str, int] = {}
    for r in placed:
        replica = r.result(timeout_s=60)["replica"]
        counts[replica] = counts.get(replica, 0) + 1
    held: dict[str, Any] = {}
    for name in names:
        where = handle.options(session_id=name).where.remote().result(timeout_s=60)
        stats = handle.options(session_id=name).stats.remote().result(timeout_s=60)
        held[where["replica"]] = {"tenants": where["tenants"], "loaded_tenants": stats["loaded_tenants"],
                                  "used_bytes": stats["used_bytes"], "memory_budget_bytes": stats["memory_budget_bytes"],
                                  "loads": stats["loads"], "load_ms_total": round(stats["load_ms_total"], 1)}
    return {"placement_ids": ids, "placement": sorted(counts.values(), reverse=True), "replicas": held}


def cold_loads(servers: dict[str, EngramProcess], names: list[str], query: str) -> dict[str, Any]:
    """Ray: every shard replica SIGKILLed, the ring back to two live ones, then each tenant's first search (its
    new owner takes the log over, replays it from the bucket, rebuilds FAISS and Lucene) vs the next. The
    single node: restarted, then the same (its local WAL, Lucene and dense snapshot are on its disk)."""
    out: dict[str, Any] = {}
    victims = _live_replicas()
    for w in victims.values():
        os.kill(w["pid"], signal.SIGKILL)
    out["ray_replicas_back_s"] = round(_wait_replicas(2, gone=set(victims)), 2)
    out["ray"] = _first_searches(servers["ray"].address, names, query)
    handle = _shards()
    out["ray_replica_stats"] = [{k: handle.options(session_id=n).stats.remote().result(timeout_s=60)[k]
                                 for k in ("loaded_tenants", "used_bytes", "loads", "load_ms_total")} for n in names]
    single = servers["single"]
    single.stop()
    started = time.perf_counter()
    single.start()
    single.wait_ready()
    out["single_restart_s"] = round(time.perf_counter() - started, 1)
    out["single"] = _first_searches(single.address, names, query)
    return out


def replica_kills() -> dict[str, Any]:
    path = RESULTS / "replica_kills.json"
    if not path.is_file():
        return {}
    k = json.loads(path.read_text())
    rec = sorted(r["recovery_s"] for r in k["recoveries"])
    rep = sorted(r["replaced_s"] for r in k["recoveries"])
    return {"source": "tests/integration/test_cluster.py (CLUSTER_TEST_KILLS=10)", "kills": k["kills"],
            "acknowledged_writes": k["acknowledged_writes"], "lost": k["lost"], "duplicates": k["duplicates"],
            "recovery_s_median": rec[len(rec) // 2], "recovery_s_min": rec[0], "recovery_s_max": rec[-1],
            "replaced_s_median": rep[len(rep) // 2], "replaced_s_max": rep[-1]}


class CpuLock:
    """``flock`` on a shared lock file: :meth:`shared` while preparing, :meth:`exclusive` while timing."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT) if path else -1

    def _take(self, how: int, name: str) -> None:
        if self.fd < 0:
            return
        import fcntl

        started = time.perf_counter()
        fcntl.flock(self.fd, how)
        log.info("cpu lock %s after %.0fs", name, time.perf_counter() - started)

    def shared(self) -> None:
        import fcntl

        self._take(fcntl.LOCK_SH, "shared")

    def exclusive(self) -> None:
        import fcntl

        self._take(fcntl.LOCK_EX, "exclusive")


def bench(args: argparse.Namespace, workdir: Path, endpoint: str) -> dict[str, Any]:
    import ray

    from server.config import ObjectStoreConfig
    from server.store.object_wal import ObjectLogBackend

    names = [tenant_name(i) for i in range(args.tenants)]
    write_tenant = tenant_name(args.tenants)
    queries = query_texts(5000)
    lock = CpuLock(args.lock)
    lock.shared()   # before anything starts, so that startup_s is the servers' own
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)   # 2 shards + the Encoder + the controller
    ray_env = {"ENGRAM_OBJECT_STORE__BUCKET": BUCKET, "ENGRAM_OBJECT_STORE__ENDPOINT": endpoint,
               "ENGRAM_CLUSTER__REPLICAS": "2", "ENGRAM_CLUSTER__SHARD_CPUS": "1", "ENGRAM_CLUSTER__ENCODER_CPUS": "1",
               **S3_ENV}
    started = time.perf_counter()   # both start at once; each one's start-up counts from here
    servers = {"single": EngramProcess("single", workdir=workdir, env={}),
               "ray": EngramProcess("ray", workdir=workdir, env=ray_env,
                                    ray_address=ray.get_runtime_context().gcs_address),
               # Writes only: a single node whose logs are in the same bucket (no Ray) tells the bucket's share of a
               # Write's extra (its conditional PUT) from what Ray's hops add.
               "single_bucket": EngramProcess("single_bucket", workdir=workdir, env={
                   "ENGRAM_OBJECT_STORE__BUCKET": BUCKET, "ENGRAM_OBJECT_STORE__ENDPOINT": endpoint,
                   "ENGRAM_OBJECT_STORE__PREFIX": "single_bucket/", **S3_ENV})}
    searched = {side: servers[side] for side in ("single", "ray")}
    out: dict[str, Any] = {"tenants": args.tenants, "memories_per_tenant": args.per_tenant, "search": [],
                           "writes": [], "seed": {}, "startup_s": {}}
    try:
        for side, server in servers.items():
            out[f"server_{side}"] = server.wait_ready()
            out["startup_s"][side] = round(time.perf_counter() - started, 1)
        for side, server in searched.items():
            out["seed"][side] = seed(server.address, tenants=args.tenants, per_tenant=args.per_tenant)
            log.info("seeded %s: %s", side, out["seed"][side])
        channel, _, admin = _stub(servers["single_bucket"].address)
        with channel:
            admin.CreateTenant(spb.CreateTenantRequest(tenant_id=write_tenant), metadata=METADATA, timeout=120)
        lock.exclusive()
        out["loadavg_1m_timed_start"] = round(os.getloadavg()[0], 2)
        for side, server in searched.items():
            asyncio.run(touch_tenants(server.address, ADMIN_KEY, names, queries[0]))
            asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=32,
                                 seconds=args.warmup, seed=99))
        for level in args.levels:
            for side, server in searched.items():
                load_before = os.getloadavg()[0]
                result = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries,
                                              concurrency=level, seconds=args.seconds, seed=level))
                row = {"side": side, **result.summary(), "loadavg_1m_before": round(load_before, 2)}
                log.info("search %s c=%d: %.1f QPS p50 %.1f p95 %.1f %s", side, level, row["qps"], row["p50_ms"],
                         row["p95_ms"], row["errors"] or "")
                out["search"].append(row)
        for side, server in servers.items():   # every side's write path warm (the bucket-only one took no seed)
            asyncio.run(run_writes(server.address, ADMIN_KEY, tenant=write_tenant, concurrency=1,
                                   seconds=args.warmup, tag=f"{side}-warm"))
        for level in args.write_levels:
            for side, server in servers.items():
                result = asyncio.run(run_writes(server.address, ADMIN_KEY, tenant=write_tenant, concurrency=level,
                                                seconds=args.write_seconds, tag=f"{side}-{level}"))
                s = result.summary()
                row = {"side": side, **{k: s[k] for k in ("concurrency", "requests", "qps", "p50_ms", "p95_ms",
                                                          "p99_ms", "mean_ms", "errors")}}
                log.info("write %s c=%d: %s", side, level, row)
                out["writes"].append(row)
        backend = ObjectLogBackend.from_config(ObjectStoreConfig(bucket=BUCKET, endpoint=endpoint), env=os.environ)
        commits = store_commits(backend, commits=args.commits)
        out["store_commits"] = {name: _summary(v) for name, v in commits.items()}
        log.info("store commits: %s", out["store_commits"])
        out["tenants_per_replica"] = tenants_per_replica(names)
        log.info("tenants per replica: %s", out["tenants_per_replica"])
        out["cold_loads"] = cold_loads(servers, names, queries[1])
        log.info("cold loads: %s", out["cold_loads"])
    finally:
        for server in servers.values():
            server.stop()
        ray.shutdown()
    out["replica_kills"] = replica_kills()
    return out


def markdown(r: dict[str, Any]) -> str:
    by = {(x["side"], x["concurrency"]): x for x in r["search"]}
    lines = ["| measurement | single node | engram on Ray | Ray / single |", "|---|---:|---:|---:|"]
    for level in sorted({c for _, c in by}):
        s, c = by[("single", level)], by[("ray", level)]
        lines.append(f"| search, {level} client{'s' if level > 1 else ''}: QPS | {s['qps']:.1f} | {c['qps']:.1f} "
                     f"| {c['qps'] / s['qps']:.2f}× |")
        lines.append(f"| search, {level} client{'s' if level > 1 else ''}: p50 / p95 ms | {s['p50_ms']:.1f} / "
                     f"{s['p95_ms']:.1f} | {c['p50_ms']:.1f} / {c['p95_ms']:.1f} | {c['p50_ms'] / s['p50_ms']:.2f}× / "
                     f"{c['p95_ms'] / s['p95_ms']:.2f}× |")
    wby = {(x["side"], x["concurrency"]): x for x in r["writes"]}
    for level in sorted({c for _, c in wby}):
        s, c = wby[("single", level)], wby[("ray", level)]
        lines.append(f"| Write of 1 memory, {level} client{'s' if level > 1 else ''}: ack p50 / p95 ms | "
                     f"{s['p50_ms']:.1f} / {s['p95_ms']:.1f} | {c['p50_ms']:.1f} / {c['p95_ms']:.1f} | "
                     f"{c['p50_ms'] / s['p50_ms']:.2f}× / {c['p95_ms'] / s['p95_ms']:.2f}× |")
        b = wby.get(("single_bucket", level))
        if b is not None:
            lines.append(f"| Write of 1 memory, {level} client{'s' if level > 1 else ''}, single node on the same "
                         f"bucket: ack p50 / p95 ms | {b['p50_ms']:.1f} / {b['p95_ms']:.1f} | {c['p50_ms']:.1f} / "
                         f"{c['p95_ms']:.1f} | {c['p50_ms'] / b['p50_ms']:.2f}× / {c['p95_ms'] / b['p95_ms']:.2f}× |")
    sc = r["store_commits"]
    lo, ob = sc["local_fsync"], sc["object_store"]
    lines.append(f"| group commit of 1 memory (store only): p50 / p95 ms, local fsync vs S3 PUT | {lo['p50_ms']:.1f} / "
                 f"{lo['p95_ms']:.1f} | {ob['p50_ms']:.1f} / {ob['p95_ms']:.1f} | {ob['p50_ms'] / lo['p50_ms']:.2f}× / "
                 f"{ob['p95_ms'] / lo['p95_ms']:.2f}× |")
    seed_s, seed_c = r["seed"]["single"], r["seed"]["ray"]
    lines.append(f"| bulk ingest (Writes of 64): memories/s | {seed_s['memories_per_s']:.0f} | "
                 f"{seed_c['memories_per_s']:.0f} | {seed_c['memories_per_s'] / seed_s['memories_per_s']:.2f}× |")
    cl = r["cold_loads"]
    first_s = float(np.median([x["first_ms"] for x in cl["single"]]))
    first_c = float(np.median([x["first_ms"] for x in cl["ray"]]))
    next_s = float(np.median([x["next_ms"] for x in cl["single"]]))
    next_c = float(np.median([x["next_ms"] for x in cl["ray"]]))
    lines.append(f"| first search of a {r['memories_per_tenant']:,}-memory tenant after a restart / replica kill "
                 f"(loads it), median ms | {first_s:.0f} | {first_c:.0f} | {first_c / first_s:.2f}× |")
    lines.append(f"| the next search, median ms | {next_s:.0f} | {next_c:.0f} | |")
    k = r.get("replica_kills") or {}
    if k:
        lines.append(f"| recovery after SIGKILL of the owning replica under writes ({k['kills']} kills), median / max s "
                     f"| — | {k['recovery_s_median']:.1f} / {k['recovery_s_max']:.1f} | |")
    return "\n".join(lines) + "\n" + added(r)


def added(r: dict[str, Any]) -> str:
    """What Ray adds per call at one client, p50: a search over the single node; a Write over the single node on
    its local disk and over the single node on the same bucket (the same durability: the commit in the bucket)."""
    by = {(x["side"], x["concurrency"]): x["p50_ms"] for x in r["search"]}
    wby = {(x["side"], x["concurrency"]): x["p50_ms"] for x in r["writes"]}
    lines = ["", "| 1 client, p50 ms | single node | single node on the bucket | engram on Ray | added by Ray |",
             "|---|---:|---:|---:|---:|",
             f"| search | {by[('single', 1)]:.1f} | | {by[('ray', 1)]:.1f} | {by[('ray', 1)] - by[('single', 1)]:+.1f} |"]
    ray, single = wby[("ray", 1)], wby[("single", 1)]
    lines.append(f"| Write of 1 memory, over the single node on local disk | {single:.1f} | | {ray:.1f} | "
                 f"{ray - single:+.1f} |")
    if ("single_bucket", 1) in wby:
        bucket_ms = wby[("single_bucket", 1)]
        lines.append(f"| Write of 1 memory, over the single node on the same bucket | | {bucket_ms:.1f} | {ray:.1f} | "
                     f"{ray - bucket_ms:+.1f} |")
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for side, style in (("single", "o-"), ("ray", "s--")):
        runs = sorted((x for x in r["search"] if x["side"] == side), key=lambda x: x["concurrency"])
        xs = [x["concurrency"] for x in runs]
        axes[0].plot(xs, [x["qps"] for x in runs], style, label=side)
        axes[1].plot(xs, [x["p95_ms"] for x in runs], style, label=f"{side} p95")
        axes[1].plot(xs, [x["p50_ms"] for x in runs], style, alpha=0.4, label=f"{side} p50")
    for ax, label in ((axes[0], "search QPS"), (axes[1], "search latency (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(label)
        ax.legend()
    axes[1].set_yscale("log")
    bars = [(f"Write c={x['concurrency']}\n{x['side']}", x["p50_ms"], x["p95_ms"]) for x in r["writes"]]
    bars += [(f"commit\n{name.replace('_', ' ')}", v["p50_ms"], v["p95_ms"]) for name, v in r["store_commits"].items()]
    xs = np.arange(len(bars))
    axes[2].bar(xs - 0.2, [b[1] for b in bars], 0.4, label="p50")
    axes[2].bar(xs + 0.2, [b[2] for b in bars], 0.4, label="p95")
    axes[2].set_xticks(xs, [b[0] for b in bars], fontsize=7)
    axes[2].set_ylabel("ack latency (ms)")
    axes[2].legend()
    fig.suptitle(f"single node vs engram on Ray (2 TenantShard replicas, SeaweedFS), {r['tenants']} x "
                 f"{r['memories_per_tenant']:,} memories, {r['cpus']} cores shared by everything", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--per-tenant", type=int, default=1500)
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=6.0)
    parser.add_argument("--write-levels", default="1,8")
    parser.add_argument("--write-seconds", type=float, default=6.0)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--lock", default="", help="lock file: shared while preparing, exclusive while timing")
    parser.add_argument("--replot", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.replot:
        saved = json.loads((args.out / "cluster.json").read_text())
        plot(saved, args.out / "cluster.png")
        (args.out / "cluster.md").write_text(markdown(saved))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args.levels = [int(x) for x in args.levels.split(",")]
    args.write_levels = [int(x) for x in args.write_levels.split(",")]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engram-cluster-bench-") as tmp, bucket(Path(tmp) / "weed") as endpoint:
        result = bench(args, Path(tmp), endpoint)
    result.update({"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                   "seconds_per_run": args.seconds, "write_seconds_per_run": args.write_seconds,
                   "seconds": round(time.perf_counter() - started, 1), "note": (
                       "both servers up at once on one 2-core machine with their clients, the S3 server and Ray's own "
                       "processes; no reranker on either side (rerank_depth -1), embedding cache off; closed-loop "
                       "clients, one query per Search, top_k 10; per level single then Ray, back to back")})
    (args.out / "cluster.json").write_text(json.dumps(result, indent=1))
    (args.out / "cluster.md").write_text(markdown(result))
    plot(result, args.out / "cluster.png")
    sys.stdout.write(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
