"""One traced search through a single node (``engram serve``) and one through engram on Ray (``engram serve
--ray``, its own local Ray: two TenantShard replicas, an Encoder and a Reranker replica, the logs in a ``weed
mini`` bucket), both with ``tracing = true`` at the defaults (bundled reranker), every process exporting over
OTLP/HTTP to the receiver of tests/otlp_support.py in this process. Each side gets the same memories; after a
few warm-up searches, one search is sent with a ``traceparent`` of a trace made here, and that trace's spans are
written as a tree (names, parents, kinds, start offsets and durations).

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.serving.trace_example

Writes ``benchmarks/results/serving/trace_example.{json,md}`` (docs/operations/tracing.md shows the trees).
"""

from __future__ import annotations

import argparse
import datetime
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cluster.run import EngramProcess, seed
from benchmarks.cluster.stack import BUCKET, ROOT, S3_ENV, bucket
from benchmarks.serving.build import ADMIN_KEY, tenant_name
from benchmarks.serving.corpus import query_texts

OUT = ROOT / "benchmarks" / "results" / "serving" / "trace_example.json"
COMMAND = "flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.serving.trace_example"


def _receiver() -> Any:
    sys.path.insert(0, str(ROOT / "tests"))
    import otlp_support   # the tests' real OTLP/HTTP receiver

    return otlp_support


def start_sides(workdir: Path, endpoint: str, traces_url: str) -> dict[str, EngramProcess]:
    traced = {"ENGRAM_TRACING": "true", "ENGRAM_MODELS__RERANKER": "bundled", "OTEL_BSP_SCHEDULE_DELAY": "100",
              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces_url}
    ray = {"ENGRAM_OBJECT_STORE__BUCKET": BUCKET, "ENGRAM_OBJECT_STORE__ENDPOINT": endpoint,
           "ENGRAM_OBJECT_STORE__PREFIX": "trace/", "ENGRAM_CLUSTER__REPLICAS": "2", "ENGRAM_CLUSTER__SHARD_CPUS": "1",
           "ENGRAM_CLUSTER__ENCODER_CPUS": "1", **S3_ENV}
    return {"single": EngramProcess("single", workdir=workdir, env={**traced, "OTEL_SERVICE_NAME": "engram-single"}),
            "ray": EngramProcess("ray", workdir=workdir, env={**traced, **ray, "OTEL_SERVICE_NAME": "engram-ray"},
                                 ray_local=True)}


def traced_search(address: str, query: str) -> tuple[str, float, dict[str, Any]]:
    """One Search at the defaults under a new trace (``traceparent`` of a caller span made up here): the trace id,
    the client's latency and the reply's timings."""
    import grpc

    from engram_proto.v1 import messages_pb2 as pb
    from engram_proto.v1 import service_pb2 as spb
    from engram_proto.v1 import service_pb2_grpc as sgrpc

    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    metadata = (("authorization", f"Bearer {ADMIN_KEY}"), ("traceparent", f"00-{trace_id}-{caller}-01"))
    with grpc.insecure_channel(address) as channel:
        t0 = time.perf_counter()
        reply = sgrpc.MemoryServiceStub(channel).Search(spb.SearchRequest(
            tenant_id=tenant_name(0), queries=[pb.SearchQuery(text=query, top_k=10)]), metadata=metadata, timeout=60)
        ms = (time.perf_counter() - t0) * 1e3
    t = reply.results[0].timings
    timings = {f: round(getattr(t, f) / 1e6, 2) for f in ("queue_ns", "embed_ns", "ann_ns", "bm25_ns", "rerank_ns",
                                                          "total_ns")}
    timings["rerank_depth_used"] = t.rerank_depth_used
    return trace_id, ms, timings


def span_rows(spans: list[Any], trace_id: str) -> list[dict[str, Any]]:
    """The trace's spans as a tree walk from its root (the span whose parent is the caller's): depth first,
    children by start time."""
    own = [s for s in spans if s.trace_id == trace_id]
    ids = {s.span_id for s in own}
    roots = [s for s in own if s.parent_span_id not in ids]
    children: dict[str, list[Any]] = {}
    for s in own:
        children.setdefault(s.parent_span_id, []).append(s)
    rows: list[dict[str, Any]] = []

    def walk(span: Any, depth: int, origin: int) -> None:
        rows.append({"name": span.name, "kind": span.kind.lower(), "depth": depth, "span_id": span.span_id,
                     "parent_span_id": span.parent_span_id, "service": span.resource.get("service.name", ""),
                     "start_ms": round((span.start_ns - origin) / 1e6, 2), "duration_ms": round(span.duration_ms, 2),
                     "attributes": {k: v for k, v in span.attributes.items() if k.startswith("engram.")}})
        for child in sorted(children.get(span.span_id, []), key=lambda s: (s.start_ns, s.name)):
            walk(child, depth + 1, origin)

    for root in roots:
        walk(root, 0, root.start_ns)
    return rows


def lines(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        attrs = ", ".join(f"{k.removeprefix('engram.')}={v}" for k, v in r["attributes"].items()
                          if k in ("engram.batch.size", "engram.batch.requests", "engram.rerank.depth"))
        head = f"{'  ' * r['depth']}- {r['name']} ({r['kind']})"
        out.append(f"{head} {r['duration_ms']:.2f} ms, at +{r['start_ms']:.2f} ms" + (f"  [{attrs}]" if attrs else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=500, help="memories written to the one tenant")
    parser.add_argument("--warmup", type=int, default=20, help="searches before the one that is shown")
    args = parser.parse_args(argv)
    otlp = _receiver()
    receiver = otlp.OtlpReceiver()
    queries = query_texts(args.warmup + 1)
    out: dict[str, Any] = {"date": datetime.date.today().isoformat(), "command": COMMAND,
                           "machine": subprocess.run(["sh", "-c", "lscpu | grep 'Model name'"], capture_output=True,
                                                     text=True).stdout.split(":", 1)[-1].strip(),
                           "memories": args.memories, "sides": {}}
    with tempfile.TemporaryDirectory(prefix="engram-trace-") as tmp, bucket(Path(tmp) / "weed") as endpoint:
        sides = start_sides(Path(tmp), endpoint, receiver.endpoint)
        try:
            for name, server in sides.items():
                server.wait_ready()
                seed(server.address, tenants=1, per_tenant=args.memories)
                for q in queries[:args.warmup]:
                    traced_search(server.address, q)
                time.sleep(1.0)
                receiver.clear()
                trace_id, ms, timings = traced_search(server.address, queries[-1])
                spans = receiver.wait_for(lambda got, t=trace_id: sum(s.trace_id == t for s in got) >= 8
                                          and any(s.trace_id == t and s.name == "engram.decay" for s in got)
                                          and (name == "single" or any(s.trace_id == t and s.name.startswith(
                                              "engram.cluster.Reranker") for s in got)), timeout_s=20)
                time.sleep(1.0)   # stragglers from the other processes' exporters
                rows = span_rows(receiver.received() or spans, trace_id)
                out["sides"][name] = {"trace_id": trace_id, "client_ms": round(ms, 2), "reply_timings_ms": timings,
                                      "spans": rows, "tree": lines(rows)}
                print(f"{name}: client {ms:.1f} ms\n" + "\n".join(lines(rows)), flush=True)
        finally:
            for server in sides.values():
                server.stop()
            receiver.close()
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    md = [f"# One traced search ({out['date']}, {out['machine']})", "", f"`{COMMAND}`", ""]
    for name, side in out["sides"].items():
        md += [f"## {name} (client {side['client_ms']:.1f} ms)", "", "```", *side["tree"], "```", ""]
    OUT.with_suffix(".md").write_text("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
