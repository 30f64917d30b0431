"""The serving benchmark: two variants side by side in one run, against real server processes.

For each dataset (tenants × memories per tenant) two servers start from copies of the same cached data
directory; both stay up, and for each concurrency level the two are measured back to back, so that load
from other processes on the machine hits both alike. The variants (``--compare``): ``batching`` (default,
no rerank): batching on vs off (``batching.max_batch_requests`` 1); ``controller``: the bundled reranker at
the server's default depth, with the rerank-depth controller (``search.latency_target_ms`` default) vs
without it (target 0: always the full depth). Results: JSON + PNG under benchmarks/results/serving/ and a
markdown table.

    .venv/bin/python -m benchmarks.serving.run                       # the CPU grid
    .venv/bin/python -m benchmarks.serving.run --compare controller --datasets 1x10000 --name rerank_grid
    .venv/bin/python -m benchmarks.serving.run --quick               # a smoke run
    .venv/bin/python -m benchmarks.serving.run --device cuda --reranker DIR --rerank-depth 100 --out DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from benchmarks.serving.build import ADMIN_KEY, build, tenant_name
from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import run_load, touch_tenants
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc

log = logging.getLogger("benchmarks.serving")
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "serving"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Each comparison: variant name → (batching on, extra server env); the first is the one ratios are quoted for.
COMPARISONS: dict[str, dict[str, tuple[bool, dict[str, str]]]] = {
    "batching": {"on": (True, {}), "off": (False, {})},
    "controller": {"controller": (True, {}), "full-depth": (True, {"ENGRAM_SEARCH__LATENCY_TARGET_MS": "0"})},
}


class ServerProcess:
    """``engram serve`` in a child process on a copy of a data directory."""

    def __init__(self, data: Path, *, batching: bool, env: dict[str, str], workdir: Path, name: str = "") -> None:
        self.port = free_port()
        name = name or ("on" if batching else "off")
        self.dir = workdir / name
        shutil.copytree(data, self.dir)
        self.log_path = workdir / f"server-{name}.log"
        child_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                     "ENGRAM_ADMIN_KEY": ADMIN_KEY, "ENGRAM_LOG_LEVEL": "WARNING",
                     **({} if batching else {"ENGRAM_BATCHING__MAX_BATCH_REQUESTS": "1"}),   # off: one query a batch
                     # Every query counts: no embedding cache hits in a throughput benchmark.
                     "ENGRAM_BATCHING__QUERY_CACHE_TTL_MS": "0", **env}
        self.batching = batching
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engram_cli", "serve", "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", str(self.dir)], cwd=ROOT, env=child_env,
            stdout=self.log_path.open("w"), stderr=subprocess.STDOUT)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout_s: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = "".join(Path(self.log_path).read_text(errors="replace").splitlines(keepends=True)[-15:])
                raise RuntimeError(f"server exited ({self.proc.returncode}); the end of {self.log_path}:\n{tail}")
            try:
                with grpc.insecure_channel(self.address) as channel:
                    info = sgrpc.MemoryServiceStub(channel).Info(
                        spb.InfoRequest(), metadata=(("authorization", f"Bearer {ADMIN_KEY}"),), timeout=2)
                return {"device": info.device, "embedder": info.embedder.name, "embedder_dtype": info.embedder.dtype,
                        "reranker": info.reranker.name, "batching": {
                            "enabled": info.batching.enabled, "max_batch_requests": info.batching.max_batch_requests,
                            "max_batch_tokens": info.batching.max_batch_tokens,
                            "max_wait_ms": info.batching.max_wait_ms}}
            except grpc.RpcError:
                time.sleep(0.5)
        raise TimeoutError(f"server not ready after {timeout_s}s; see {self.log_path}")

    def wait_indexes_built(self, timeout_s: float = 900) -> list[str]:
        """Waits until no tenant has a background index build running (the server's steady state);
        returns the dense index descriptions in use."""
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(self.address) as channel:
            stub = sgrpc.AdminServiceStub(channel)
            while True:
                stats = stub.Stats(spb.StatsRequest(), metadata=(("authorization", f"Bearer {ADMIN_KEY}"),),
                                   timeout=30)
                if all(t.state != "BUILDING" for t in stats.tenants) or time.monotonic() > deadline:
                    return sorted({t.dense_index for t in stats.tenants})
                time.sleep(2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def load_embedder_for_build(device: str):  # type: ignore[no-untyped-def]
    import torch

    from server.app import load_embedder
    from server.config import load_config

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    model = load_embedder(load_config(env=os.environ), device)   # ENGRAM_MODELS__EMBEDDER applies
    model.warmup()
    return model


def bench_dataset(*, tenants: int, per_tenant: int, levels: list[int], seconds: float, env: dict[str, str],
                  rerank_depth: int, workdir: Path, warmup_s: float = 30.0, compare: str = "batching") -> dict[str, Any]:
    data = build(load_embedder_for_build(env.get("ENGRAM_MODELS__DEVICE", "cpu")), tenants=tenants,
                 per_tenant=per_tenant)
    names = [tenant_name(i) for i in range(tenants)]
    queries = query_texts(5000)
    servers = {mode: ServerProcess(data, batching=batching, env={**env, **extra}, workdir=workdir, name=mode)
               for mode, (batching, extra) in COMPARISONS[compare].items()}
    out: dict[str, Any] = {"tenants": tenants, "memories_per_tenant": per_tenant, "compare": compare, "runs": []}
    try:
        for mode, server in servers.items():
            out[f"server_{mode}"] = server.wait_ready()
            started = time.perf_counter()
            asyncio.run(touch_tenants(server.address, ADMIN_KEY, names, queries[0]))
            out[f"dense_index_{mode}"] = server.wait_indexes_built()
            # Warm-up long enough for the JVM's JIT to settle: with 3 s its C2 compiler thread was still
            # taking ~15% of a core during the measured runs, with 6 s 2.6-3.2 ms of CPU a query in the
            # unbatched server (README "Serving benchmark"); after 30 s 0.02-0.08.
            asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=32,
                                 seconds=warmup_s, rerank_depth=rerank_depth, seed=99))
            log.info("%s ready and warm in %.1fs", mode, time.perf_counter() - started)
        for level in levels:
            for mode, server in servers.items():
                load_before = os.getloadavg()[0]
                result = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries,
                                              concurrency=level, seconds=seconds, rerank_depth=rerank_depth,
                                              seed=level))
                row = {"variant": mode, "batching": "on" if server.batching else "off", **result.summary(),
                       "loadavg_1m_before": round(load_before, 2),
                       "loadavg_1m_after": round(os.getloadavg()[0], 2)}
                log.info("t%d m%d %s c=%d: %s", tenants, per_tenant, mode, level, row)
                out["runs"].append(row)
    finally:
        for server in servers.values():
            server.stop()
    return out


def _variants(ds: dict[str, Any]) -> list[str]:
    return list(COMPARISONS[ds.get("compare", "batching")])


def _depth(r: dict[str, Any]) -> str:
    used = r.get("rerank_depth_used") or {}
    return f"{used['mean']:.1f} ({used['min']}-{used['max']})" if used and used.get("max") else "–"


def markdown(results: dict[str, Any]) -> str:
    lines = [("| tenants × memories | clients | variant | QPS | p50 ms | p95 ms | p99 ms | mean batch | rerank depth "
              "mean (min-max) | QPS ratio |"), "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ds in results["datasets"]:
        first, second = _variants(ds)
        by = {(r.get("variant", r["batching"]), r["concurrency"]): r for r in ds["runs"]}
        for (mode, level), r in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0] != first)):
            other = by.get((second, level))
            ratio = f"{r['qps'] / other['qps']:.2f}×" if mode == first and other and other["qps"] else ""
            lines.append(f"| {ds['tenants']} × {ds['memories_per_tenant'] // 1000}k | {level} | {mode} | {r['qps']:.1f} "
                         f"| {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | {r['mean_batch_size']:.1f} "
                         f"| {_depth(r)} | {ratio} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = results["datasets"]
    fig, axes = plt.subplots(2, len(datasets), figsize=(5 * len(datasets), 7), squeeze=False)
    for col, ds in enumerate(datasets):
        for mode, style in zip(_variants(ds), ("o-", "s--"), strict=True):
            runs = sorted((r for r in ds["runs"] if r.get("variant", r["batching"]) == mode),
                          key=lambda r: r["concurrency"])
            xs = [r["concurrency"] for r in runs]
            label = f"batching {mode}" if ds.get("compare", "batching") == "batching" else f"rerank {mode}"
            axes[0][col].plot(xs, [r["qps"] for r in runs], style, label=label)
            axes[1][col].plot(xs, [r["p95_ms"] for r in runs], style, label=f"{label} p95")
        rerank = " (rerank at the default depth)" if ds.get("compare") == "controller" else " (no rerank)"
        axes[0][col].set_title(f"{ds['tenants']} tenant(s) × {ds['memories_per_tenant']:,} memories{rerank}", fontsize=9)
        axes[0][col].set_ylabel("QPS")
        axes[1][col].set_ylabel("p95 latency (ms)")
        axes[1][col].set_yscale("log")
        for row in (0, 1):
            axes[row][col].set_xscale("log", base=2)
            axes[row][col].set_xlabel("concurrent clients")
            axes[row][col].legend()
    import textwrap

    fig.suptitle(textwrap.fill(f"engram serving ({results['device']}; {results['note']})", 150), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="1x10000,1x100000,100x10000", help="TENANTSxMEMORIES,...")
    parser.add_argument("--levels", default="1,8,32,64")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=30.0,
                        help="seconds of load per server before measuring (30: the JVM's JIT has settled)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reranker", default="", help="cross-encoder folder; '' = no rerank")
    parser.add_argument("--rerank-depth", type=int, default=-1)
    parser.add_argument("--server-env", action="append", default=[], help="extra KEY=VALUE for the servers")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--name", default="serving")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="batching",
                        help="batching: on vs off, no rerank; controller: bundled reranker, controller on vs off")
    parser.add_argument("--quick", action="store_true", help="1x10000, clients 1 and 8, 3 s each")
    parser.add_argument("--replot", action="store_true", help="only redraw the PNG and table from the JSON")
    parser.add_argument("--merge", default="", help="with --replot: NAME,NAME,... JSONs under --out drawn as one "
                        "PNG and table named --name (e.g. the batching grid beside the controller grid)")
    args = parser.parse_args(argv)
    if args.replot:
        parts = [json.loads((Path(args.out) / f"{n}.json").read_text()) for n in (args.merge or args.name).split(",")]
        saved = {**parts[0], "datasets": [ds for part in parts for ds in part["datasets"]]}
        plot(saved, Path(args.out) / f"{args.name}.png")
        (Path(args.out) / f"{args.name}.md").write_text(markdown(saved))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.quick:
        args.datasets, args.levels, args.seconds, args.warmup = "1x10000", "1,8", 3.0, 3.0
    # No --reranker: none loaded at all (not the bundled default), as the searches send rerank_depth -1.
    if args.compare == "controller":   # the shipped reranker at the server's default depth (the controller's)
        args.reranker, args.rerank_depth = args.reranker or "bundled", 0
    reranker = str(Path(args.reranker).resolve()) if args.reranker and args.reranker != "bundled" else args.reranker
    env = {"ENGRAM_MODELS__DEVICE": args.device, "ENGRAM_MODELS__RERANKER": reranker}
    env.update(kv.split("=", 1) for kv in args.server_env)  # type: ignore[arg-type]
    levels = [int(x) for x in args.levels.split(",")]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "device": args.device, "cpus": os.cpu_count(), "platform": platform.platform(),
        "python": platform.python_version(), "seconds_per_run": args.seconds, "warmup_s": args.warmup,
        "rerank_depth": args.rerank_depth,
        "reranker": args.reranker, "server_env": env, "loadavg_at_start": os.getloadavg(),
        "note": ("closed-loop clients, one query per Search, top_k 10, no embedding cache; servers for batching "
                 "on and off run side by side and are measured back to back per level; the load generator "
                 "shares the machine with the server and with other processes"),
        "datasets": []}
    with tempfile.TemporaryDirectory(prefix="engram-serving-") as tmp:
        for spec in args.datasets.split(","):
            tenants, per_tenant = (int(x) for x in spec.split("x"))
            work = Path(tmp) / spec
            work.mkdir()
            results["datasets"].append(bench_dataset(tenants=tenants, per_tenant=per_tenant, levels=levels,
                                                     seconds=args.seconds, env=env, rerank_depth=args.rerank_depth,
                                                     workdir=work, warmup_s=args.warmup, compare=args.compare))
            (out_dir / f"{args.name}.json").write_text(json.dumps(results, indent=2))
    results["loadavg_at_end"] = os.getloadavg()
    (out_dir / f"{args.name}.json").write_text(json.dumps(results, indent=2))
    (out_dir / f"{args.name}.md").write_text(markdown(results))
    plot(results, out_dir / f"{args.name}.png")
    sys.stdout.write(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
