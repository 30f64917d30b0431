"""Does the console cost gRPC searches anything when nobody uses it? Console off vs on
(``ENGRAM_CONSOLE_LISTEN=127.0.0.1:0``), measured two ways on the 1x10000 serving dataset:

- the serving probe (one server per run), off and on in interleaved pairs;
- both servers up at once and the same load sent to each in turn, in short alternating windows (same
  queries per round, order flipped each round), so that other work on a shared machine falls on both alike;

plus the per-RPC cost of the metrics the console turns on (its latency plot reads them; with
``metrics_listen`` off they exist only for it).

    .venv/bin/python -m benchmarks.serving.console_overhead --pairs 3 --clients 1,16 --rounds 10

Writes ``benchmarks/results/console/probe_console_on_off.json``. Needs the 1x10000 dataset that
``make bench-serving`` builds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.serving.build import ADMIN_KEY, dataset_dir, tenant_name
from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import run_load, touch_tenants
from benchmarks.serving.probe import probe
from benchmarks.serving.run import ServerProcess
from server.metrics import STAGES, Metrics

OUT = Path(__file__).resolve().parents[1] / "results" / "console" / "probe_console_on_off.json"
CONSOLE_ON = {"ENGRAM_CONSOLE_LISTEN": "127.0.0.1:0"}


def metrics_us_per_search(n: int = 20000) -> float:
    """What the edge adds per Search RPC once Metrics exists: started, done, and one query's stages."""
    metrics = Metrics()
    stages = dict.fromkeys(STAGES, 1_000_000)
    path = "/engram.v1.MemoryService/Search"
    for rounds in (1000, n):
        started = time.perf_counter()
        for _ in range(rounds):
            metrics.rpc_started(path)
            metrics.rpc_done(path, "OK", 0.01)
            metrics.query_done(dict(stages), batch_size=4)
    return round((time.perf_counter() - started) / n * 1e6, 2)


def alternating(*, clients: int, rounds: int, window_s: float, warmup_s: float) -> dict[str, object]:
    """Both servers up; ``rounds`` × (a window of load on each, same seed, order flipped every round)."""
    data = dataset_dir(tenants=1, per_tenant=10000)
    names, queries = [tenant_name(0)], query_texts(5000)
    base = {"ENGRAM_MODELS__DEVICE": "cpu", "ENGRAM_MODELS__RERANKER": ""}
    latencies: dict[str, list[float]] = {"off": [], "on": []}
    seconds = {"off": 0.0, "on": 0.0}
    with tempfile.TemporaryDirectory(prefix="engram-console-ab-") as tmp:
        servers = {v: ServerProcess(data, batching=True, workdir=Path(tmp) / v,
                                    env={**base, **(CONSOLE_ON if v == "on" else {})}) for v in ("off", "on")}
        try:
            for server in servers.values():
                server.wait_ready()
                asyncio.run(touch_tenants(server.address, ADMIN_KEY, names, queries[0]))
                server.wait_indexes_built()
                asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=clients,
                                     seconds=warmup_s, seed=99))
            for r in range(rounds):
                for v in (("off", "on") if r % 2 == 0 else ("on", "off")):
                    result = asyncio.run(run_load(servers[v].address, ADMIN_KEY, tenants=names, queries=queries,
                                                  concurrency=clients, seconds=window_s, seed=r))
                    latencies[v].extend(result.latencies_ms)
                    seconds[v] += result.seconds
        finally:
            for server in servers.values():
                server.stop()
    return {v: {"requests": len(lat), "qps": round(len(lat) / seconds[v], 2),
                "p50_ms": round(float(np.percentile(lat, 50)), 2), "p95_ms": round(float(np.percentile(lat, 95)), 2)}
            for v, lat in latencies.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--clients", default="1,16")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=10, help="alternating windows per variant (0: skip)")
    p.add_argument("--window", type=float, default=3.0, help="seconds of load per alternating window")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]
    alternate = {f"{c} clients": alternating(clients=c, rounds=args.rounds, window_s=args.window, warmup_s=args.warmup)
                 for c in levels if args.rounds}
    rows = []
    for clients in levels:
        for pair in range(args.pairs):
            for console, env in (("off", {}), ("on", CONSOLE_ON)):
                load = os.getloadavg()[0]
                row = probe(batching=True, clients=clients, seconds=args.seconds, warmup_s=args.warmup, tenants=1,
                            per_tenant=10000, env=env)
                rows.append({"clients": clients, "pair": pair + 1, "console": console, "load_average_1m": load, **row})
    summary = {}
    for clients in sorted({r["clients"] for r in rows}):
        for console in ("off", "on"):
            mine = [r for r in rows if r["clients"] == clients and r["console"] == console]
            summary[f"{clients} clients, console {console}"] = {
                k: round(statistics.median(float(r[k]) for r in mine), 2)
                for k in ("qps", "p50_ms", "p95_ms", "server_cpu_ms_per_query")}
    out = {"what": "1 tenant x 10,000 memories, batching on, no reranker, console off vs on: alternating windows "
                   "on two live servers (alternating), and serving-probe runs in interleaved pairs (probe_summary: "
                   "medians per variant; rows)",
           "command": f"python -m benchmarks.serving.console_overhead --pairs {args.pairs} --clients {args.clients} "
                      f"--seconds {args.seconds} --warmup {args.warmup} --rounds {args.rounds} --window {args.window}",
           "cpus": os.cpu_count(), "metrics_us_per_search_rpc": metrics_us_per_search(), "alternating": alternate,
           "probe_summary": summary, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("alternating", "probe_summary", "metrics_us_per_search_rpc")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
