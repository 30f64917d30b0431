"""Python's garbage-collector pauses in a serving run: one batched `engram serve` on the cached 100 x 10k dataset,
``tenants.gc_tuning`` on (the default) or off (Python's own collector settings), 32 clients, 30 s of warm-up and 90 s measured; counts the server's own log lines for
collections of 100 ms or more (server/gcpauses.py) before and during the measured window, and the latency tail.

    .venv/bin/python -m benchmarks.serving.gc_pauses tuned      # the server's default
    .venv/bin/python -m benchmarks.serving.gc_pauses default    # ENGRAM_TENANTS__GC_TUNING=false

Prints one JSON line; the README table ("Serving benchmark", garbage-collector pauses) alternated the two.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.serving.build import ADMIN_KEY, dataset_dir, tenant_name
from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import run_load, touch_tenants
from benchmarks.serving.run import ServerProcess


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in (["tuned"], ["default"]):
        raise SystemExit("usage: python -m benchmarks.serving.gc_pauses tuned|default")
    tuned = args[0] == "tuned"
    data = dataset_dir(tenants=100, per_tenant=10000)
    if not (data / "complete.json").is_file():
        raise SystemExit(f"{data} missing: run `make bench-serving` once to build it")
    names, queries = [tenant_name(i) for i in range(100)], query_texts(5000)
    env = {"ENGRAM_MODELS__DEVICE": "cpu", "ENGRAM_MODELS__RERANKER": "",
           "ENGRAM_TENANTS__GC_TUNING": "true" if tuned else "false"}
    with tempfile.TemporaryDirectory(prefix="engram-gc-") as tmp:
        server = ServerProcess(data, batching=True, workdir=Path(tmp), env=env)
        try:
            server.wait_ready()
            started = time.perf_counter()
            asyncio.run(touch_tenants(server.address, ADMIN_KEY, names, queries[0]))
            touch_s = time.perf_counter() - started
            server.wait_indexes_built()
            asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=32,
                                 seconds=30, seed=99, rerank_depth=-1))
            mark = len(server.log_path.read_text().splitlines())
            result = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=32,
                                          seconds=90, seed=32, rerank_depth=-1))
            lines = server.log_path.read_text().splitlines()
        finally:
            server.stop()
    before = [line for line in lines[:mark] if "garbage collector" in line]
    during = [line for line in lines[mark:] if "garbage collector" in line]
    summary = result.summary()
    print(json.dumps({"gc_tuning": tuned, "touch_100_tenants_s": round(touch_s, 1),
                      **{k: summary[k] for k in ("qps", "p50_ms", "p95_ms", "p99_ms")},
                      "max_ms": round(max(result.latencies_ms), 1), "gc_warnings_before": len(before),
                      "gc_warnings_measured": len(during),
                      "measured_pauses_ms": [line.split("for ")[1].split(" ms")[0] for line in during]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
