"""What tracing costs a search: the same load against servers with tracing off (two of them: the second, A/A,
shows the noise), on (every request sampled, spans exported over OTLP/HTTP to a sink in this process) and on
with nothing sampled (``OTEL_TRACES_SAMPLER=always_off``), all up at once, in short alternating windows (same queries per round,
order rotated each round) so that other work on a shared machine falls on every variant alike. Plus what the
off path adds to one search in isolation (the ``tracing is None`` checks).

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.serving.tracing_overhead --clients 1,8 --rounds 6

Writes ``benchmarks/results/serving/tracing_overhead.{json,png}``. Builds (once, cached) a 1-tenant data
directory of ``--per-tenant`` memories with the serving benchmark's loader.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import tempfile
import threading
import time
import timeit
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.serving.build import ADMIN_KEY, build, tenant_name
from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import run_load, touch_tenants
from benchmarks.serving.run import ServerProcess

OUT = Path(__file__).resolve().parents[1] / "results" / "serving" / "tracing_overhead.json"
VARIANTS = ("off", "off_again", "on", "on_unsampled")   # off_again: a second off server, the A/A noise


class SpanSink:
    """Accepts OTLP/HTTP trace exports and counts their spans (what a collector would receive)."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.spans = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:   # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest.FromString(body)
                sink.bytes += len(body)
                sink.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def close(self) -> None:
        self._server.shutdown()


def variant_env(variant: str, endpoint: str) -> dict[str, str]:
    if variant.startswith("off"):
        return {"ENGRAM_TRACING": "false"}
    env = {"ENGRAM_TRACING": "true", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": variant}
    return {**env, "OTEL_TRACES_SAMPLER": "always_off"} if variant == "on_unsampled" else env


def off_path_ns() -> float:
    """What the off path adds to a single-query search: ``traced_now(None)`` in the Recall (and the item's
    ``trace`` left None), the batch's ``any(payload.traced ...)`` in the pipeline, six stage laps through
    ``Timings.lap`` (a call and a ``marks is None`` check) where the pipeline read ``time.monotonic_ns() - t0``
    before, and the two forward passes' Ray-hop contexts (an empty list each, and ``carrying`` around the pass)."""
    from server.domain import Timings
    from server.tracing import carrying, traced_now

    class Item:
        traced = False
        trace = None

    def forward() -> None:
        return None

    batch, timings, n, clock = [Item()], Timings(), 200_000, time.monotonic_ns
    now = timeit.timeit(lambda: (traced_now(None), Item.trace if Item.traced else None, any(e.traced for e in batch),
                                 [timings.lap("x", 0) for _ in range(6)],
                                 [carrying([it.trace for it in batch if it.trace], forward) for _ in range(2)]),
                        number=n)
    before = timeit.timeit(lambda: ([clock() - 0 for _ in range(6)], [forward() for _ in range(2)]), number=n)
    return round((now - before) / n * 1e9, 1)


def alternate(data: Path, *, clients: list[int], rounds: int, window_s: float, warmup_s: float,
              ) -> tuple[dict[str, Any], dict[str, int]]:
    names, queries = [tenant_name(0)], query_texts(5000)
    sink = SpanSink()
    out: dict[str, Any] = {}
    base = {"ENGRAM_MODELS__DEVICE": "cpu", "ENGRAM_MODELS__RERANKER": ""}
    with tempfile.TemporaryDirectory(prefix="engram-tracing-ab-") as tmp:
        servers = {v: ServerProcess(data, batching=True, workdir=Path(tmp), name=v,
                                    env={**base, **variant_env(v, sink.endpoint)}) for v in VARIANTS}
        try:
            for server in servers.values():
                server.wait_ready()
                asyncio.run(touch_tenants(server.address, ADMIN_KEY, names, queries[0]))
                server.wait_indexes_built()
                asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=4,
                                     seconds=warmup_s, seed=99))
            for level in clients:
                latencies: dict[str, list[float]] = {v: [] for v in VARIANTS}
                seconds = dict.fromkeys(VARIANTS, 0.0)
                for r in range(rounds):
                    order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
                    for v in order if r % 2 == 0 else tuple(reversed(order)):
                        result = asyncio.run(run_load(servers[v].address, ADMIN_KEY, tenants=names, queries=queries,
                                                      concurrency=level, seconds=window_s, seed=r))
                        latencies[v].extend(result.latencies_ms)
                        seconds[v] += result.seconds
                out[f"{level} clients"] = {
                    v: {"requests": len(lat), "qps": round(len(lat) / seconds[v], 2),
                        "p50_ms": round(float(np.percentile(lat, 50)), 2),
                        "p95_ms": round(float(np.percentile(lat, 95)), 2)} for v, lat in latencies.items()}
        finally:
            for server in servers.values():
                server.stop()
            sink.close()
    return out, {"spans_received": sink.spans, "bytes_received": sink.bytes}


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    """Each variant against off: QPS and latency ratios per load level."""
    return {level: {v: {"qps": round(r[v]["qps"] / r["off"]["qps"], 3),
                        "p50": round(r[v]["p50_ms"] / r["off"]["p50_ms"], 3),
                        "p95": round(r[v]["p95_ms"] / r["off"]["p95_ms"], 3)} for v in VARIANTS if v != "off"}
            for level, r in results.items()}


def plot(results: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = list(results)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    width = 0.8 / len(VARIANTS)
    for ax, (metric, label) in zip(axes, (("qps", "QPS"), ("p50_ms", "p50 ms"), ("p95_ms", "p95 ms")), strict=True):
        for i, v in enumerate(VARIANTS):
            values = [results[level][v][metric] for level in levels]
            bars = ax.bar(np.arange(len(levels)) + i * width, values, width, label=v)
            ax.bar_label(bars, fmt="%.1f", fontsize=7)
        ax.set_xticks(np.arange(len(levels)) + width * (len(VARIANTS) - 1) / 2, levels)
        ax.set_title(label)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def cpu_model() -> str:
    lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Model name")), "unknown")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-tenant", type=int, default=2000)
    p.add_argument("--clients", default="1,8")
    p.add_argument("--rounds", type=int, default=6, help="alternating windows per variant and load level")
    p.add_argument("--window", type=float, default=4.0, help="seconds of load per window")
    p.add_argument("--warmup", type=float, default=8.0)
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--off-path-only", action="store_true", help="only the off path's ns a search (no servers)")
    args = p.parse_args(argv)
    if args.off_path_only:
        print(json.dumps({"off_path_ns_per_search": [off_path_ns() for _ in range(5)], "cpu": cpu_model()}))
        return 0
    from server.app import load_embedder
    from server.config import load_config

    embedder = load_embedder(load_config(env={}), "cpu")
    data = build(embedder, tenants=1, per_tenant=args.per_tenant)
    del embedder
    results, sink = alternate(data, clients=[int(c) for c in args.clients.split(",")], rounds=args.rounds,
                              window_s=args.window, warmup_s=args.warmup)
    command = (f"python -m benchmarks.serving.tracing_overhead --per-tenant {args.per_tenant} --clients {args.clients} "
               f"--rounds {args.rounds} --window {args.window} --warmup {args.warmup}")
    out = {"what": f"1 tenant x {args.per_tenant} memories, batching on, no reranker, query cache off: tracing off vs on "
                   "(every request sampled, exported over OTLP/HTTP to a sink in the benchmark process) vs on with "
                   "OTEL_TRACES_SAMPLER=always_off, and a second off server (off_again: the A/A noise); four live "
                   "servers, alternating windows, order rotated each round",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "cpu": cpu_model(),
           "cpus": os.cpu_count(), "command": command, "results": results, "ratios_vs_off": ratios(results),
           "off_path_ns_per_search": off_path_ns(), **sink}
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    plot(results, path.with_suffix(".png"), f"tracing off / off again / on / on unsampled — {out['cpu']}, {out['date']}")
    print(json.dumps({k: out[k] for k in ("results", "ratios_vs_off", "off_path_ns_per_search", "spans_received")},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
