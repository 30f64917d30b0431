"""Where a serving run's CPU goes: one `engram serve` process, one client level, batching on or off.

    .venv/bin/python -m benchmarks.serving.probe --batching on --clients 32
    .venv/bin/python -m benchmarks.serving.probe --batching off --env ENGRAM_MODELS__DTYPE=int8

Reports QPS, latency, the server's and the load generator's CPU per query (from /proc and getrusage), the
server's CPU per query by thread (device_0, cpu_*, the JVM's compiler threads, ...) and how busy the whole
machine was (/proc/stat), as one JSON line. Needs the cached dataset that
``make bench-serving`` builds. The README's side-by-side variant table ("Serving benchmark") was
measured with it, one on/off pair per variant, run back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.serving.build import ADMIN_KEY, dataset_dir, tenant_name
from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import run_load, touch_tenants
from benchmarks.serving.run import ServerProcess


def _stat_cpu_s(stat: str) -> tuple[str, float]:
    """A /proc ``stat`` line's name (comm) and CPU seconds (utime + stime)."""
    fields = stat.rsplit(")", 1)[1].split()
    return stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_cpu_s(pid: int) -> float:
    return _stat_cpu_s(Path(f"/proc/{pid}/stat").read_text())[1]   # all threads


def _thread_cpu_s(pid: int) -> dict[str, tuple[str, float]]:
    """Per thread of ``pid``: its OS name (the server names its pool threads: device_0, cpu_0, ...; the JVM its
    own) and utime + stime, by thread id."""
    out: dict[str, tuple[str, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:   # the thread ended
            continue
        out[tid] = _stat_cpu_s(stat)
    return out


def thread_ms_per_query(before: dict[str, tuple[str, float]], after: dict[str, tuple[str, float]],
                        queries: int) -> dict[str, float]:
    """CPU ms a query by thread name over the window (threads of one name summed), largest first; threads
    that started inside the window count from zero."""
    by_name: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        by_name[name] = by_name.get(name, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return {k: round(v / max(1, queries) * 1000, 3) for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])
            if v > 0}


def _machine_ticks() -> tuple[int, int]:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(values), values[3] + values[4]  # all, idle + iowait


def _py_spy(pid: int, path: str, seconds: float) -> subprocess.Popen[bytes]:
    """``py-spy record`` of the server over the measured window: raw collapsed stacks by thread (its OS name
    comes from the probe's own thread table), sampled without pausing the server, at 50 Hz."""
    return subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pid), "-d",
                             str(max(1, int(seconds) - 1)), "-r", "50", "-f", "raw", "-t", "--nonblocking", "-o", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def probe(*, batching: bool, clients: int, seconds: float, warmup_s: float, tenants: int, per_tenant: int,
          env: dict[str, str], rerank_depth: int = -1, profile: str = "") -> dict[str, object]:
    data = dataset_dir(tenants=tenants, per_tenant=per_tenant)
    if not (data / "complete.json").is_file():
        raise SystemExit(f"{data} missing: run `make bench-serving` once to build it")
    names, queries = [tenant_name(i) for i in range(tenants)], query_texts(5000)
    with tempfile.TemporaryDirectory(prefix="engram-probe-") as tmp:
        server = ServerProcess(data, batching=batching, workdir=Path(tmp),
                               env={"ENGRAM_MODELS__DEVICE": "cpu", "ENGRAM_MODELS__RERANKER": "", **env})
        try:
            server.wait_ready()
            asyncio.run(touch_tenants(server.address, ADMIN_KEY, names, queries[0]))
            server.wait_indexes_built()
            asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=clients,
                                 seconds=warmup_s, seed=99, rerank_depth=rerank_depth))
            threads_0 = _thread_cpu_s(server.proc.pid)
            server_0, own_0, (all_0, idle_0) = _process_cpu_s(server.proc.pid), _own_cpu_s(), _machine_ticks()
            spy = _py_spy(server.proc.pid, profile, seconds) if profile else None
            result = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries,
                                          concurrency=clients, seconds=seconds, seed=clients, rerank_depth=rerank_depth))
            server_1, own_1, (all_1, idle_1) = _process_cpu_s(server.proc.pid), _own_cpu_s(), _machine_ticks()
            threads_1 = _thread_cpu_s(server.proc.pid)
            if spy is not None:
                spy.wait(30)
        finally:
            server.stop()
    n = max(1, len(result.latencies_ms))
    summary = result.summary()
    return {"batching": "on" if batching else "off", "clients": clients, "env": env, "rerank_depth": rerank_depth,
            **{k: summary[k] for k in ("qps", "p50_ms", "p95_ms", "p99_ms", "mean_batch_size", "errors", "server_stage_mean_ms",
                                       "rerank_depth_used")},
            "server_cpu_ms_per_query": round((server_1 - server_0) / n * 1000, 2),
            "client_cpu_ms_per_query": round((own_1 - own_0) / n * 1000, 2),
            "machine_busy_pct": round(100 * (1 - (idle_1 - idle_0) / max(1, all_1 - all_0)), 1),
            "server_thread_ms_per_query": thread_ms_per_query(threads_0, threads_1, n)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batching", choices=("on", "off"), required=True)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--warmup", type=float, default=30.0,
                   help="seconds of load before measuring: before ~30 s the JVM's JIT still compiles (README)")
    p.add_argument("--dataset", default="1x10000", help="TENANTSxMEMORIES")
    p.add_argument("--rerank-depth", type=int, default=-1, help="per query: -1 no rerank, 0 the server's default (the controller's)")
    p.add_argument("--profile", default="", help="write a py-spy raw profile of the measured window here (pip install py-spy)")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server, e.g. ENGRAM_MODELS__DTYPE=float32")
    args = p.parse_args(argv)
    tenants, per_tenant = (int(x) for x in args.dataset.split("x"))
    row = probe(batching=args.batching == "on", clients=args.clients, seconds=args.seconds, warmup_s=args.warmup,
                tenants=tenants, per_tenant=per_tenant, env=dict(kv.split("=", 1) for kv in args.env),
                rerank_depth=args.rerank_depth, profile=args.profile)
    sys.stdout.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
