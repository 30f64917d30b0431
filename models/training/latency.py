"""Search latency with and without the reranker at several depths, on the cached 10k-memory tenant.

``python -m models.training.latency [--depths 0,5,10,20,30] [--queries 60]``: one server (the trained
reranker loaded), one query per Search, sequential, distinct query texts (no embedding-cache hits);
depth 0 sends ``rerank_depth = -1`` (off). Every depth runs over the same queries, interleaved, so
load from other processes falls on all of them alike. Writes ``benchmarks/results/reranker/latency.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np

from benchmarks.quality.datasets import load_scifact, repo_root
from benchmarks.serving.build import ADMIN_KEY, dataset_dir, tenant_name
from server.app import build_app
from server.config import bundled_reranker, load_config
from server.grpc.gen.engram.v1 import messages_pb2 as pb
from server.grpc.gen.engram.v1 import service_pb2 as spb
from server.grpc.gen.engram.v1 import service_pb2_grpc as sgrpc

log = logging.getLogger(__name__)


def measure(*, depths: list[int], queries: int, reranker: str, threads: int) -> dict:
    source = dataset_dir(tenants=1, per_tenant=10_000)
    if not (source / "complete.json").is_file():
        raise SystemExit(f"{source} missing: run `make bench-serving` once to build the 10k-memory tenant")
    texts = [q.text for q in load_scifact(split="train").queries][:queries]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    with tempfile.TemporaryDirectory(prefix="engram-latency-") as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(source, data)
        config = load_config(env={}, overrides={
            "listen": "127.0.0.1:0", "data_dir": data, "admin_key": ADMIN_KEY,
            "memory": {"audit_searches": False}, "models": {"reranker": reranker, "cpu_threads": threads}})

        async def start():  # type: ignore[no-untyped-def]
            app = build_app(config)
            await app.start()
            return app

        app = asyncio.run_coroutine_threadsafe(start(), loop).result(600)
        channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
        stub = sgrpc.MemoryServiceStub(channel)
        meta = (("authorization", f"Bearer {ADMIN_KEY}"),)
        info = stub.Info(spb.InfoRequest(), metadata=meta)
        samples: dict[int, list[float]] = {d: [] for d in depths}
        rerank_ms: dict[int, list[float]] = {d: [] for d in depths}
        for i, text in enumerate(texts):
            for d in depths:
                query = pb.SearchQuery(text=f"{text} ({d})", top_k=10, rerank_depth=d if d > 0 else -1)
                t0 = time.perf_counter()
                reply = stub.Search(spb.SearchRequest(tenant_id=tenant_name(0), queries=[query]),
                                    metadata=meta, timeout=60)
                if i >= 3:  # warm-up
                    samples[d].append((time.perf_counter() - t0) * 1000)
                    rerank_ms[d].append(reply.results[0].timings.rerank_ns / 1e6)
        channel.close()
        asyncio.run_coroutine_threadsafe(app.stop(), loop).result(120)
    loop.call_soon_threadsafe(loop.stop)
    rows = {str(d): {"p50_ms": round(float(np.percentile(s, 50)), 1), "p95_ms": round(float(np.percentile(s, 95)), 1),
                     "rerank_p50_ms": round(float(np.percentile(rerank_ms[d], 50)), 1), "n": len(s)}
            for d, s in samples.items()}
    named = info.reranker.name if info.HasField("reranker") else ""
    return {"memories": 10_000, "reranker": reranker, "info_reranker": named,
            "cpu_threads": threads, "depths": rows}


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--depths", default="0,5,10,20,30")
    p.add_argument("--queries", type=int, default=60)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--reranker", default="")
    args = p.parse_args()
    result = measure(depths=[int(d) for d in args.depths.split(",")], queries=args.queries,
                     reranker=args.reranker or bundled_reranker(), threads=args.threads)
    out = repo_root() / "benchmarks" / "results" / "reranker" / "latency.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
