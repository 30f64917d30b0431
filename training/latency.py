"""Search latency with and without the reranker at several depths, on the cached 10k-memory tenant.

``python -m training.latency [--depths 0,5,10,20,30] [--queries 60]``: two servers in one process,
the trained reranker loaded in each, one with the CPU models' ``unpad`` flag (packed tokens, the default) and one
padding its batches; one query per Search, sequential, distinct query texts (no embedding-cache hits);
depth 0 sends ``rerank_depth = -1`` (off). Every (server, depth) runs over the same queries, interleaved,
so load from other processes falls on all of them alike. Writes ``benchmarks/results/reranker/latency.json``.
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
from server.app import CPU_SPEED, build_app, load_embedder, load_reranker, resolve_device
from server.config import bundled_reranker, load_config
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc

log = logging.getLogger(__name__)


VARIANTS = {"unpadded": True, "padded": False}   # name → the CPU models' unpad flag (server.app.CPU_SPEED)


def measure(*, depths: list[int], queries: int, reranker: str, threads: int) -> dict:
    source = dataset_dir(tenants=1, per_tenant=10_000)
    if not (source / "complete.json").is_file():
        raise SystemExit(f"{source} missing: run `make bench-serving` once to build the 10k-memory tenant")
    texts = [q.text for q in load_scifact(split="train").queries][:queries]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    meta = (("authorization", f"Bearer {ADMIN_KEY}"),)
    with tempfile.TemporaryDirectory(prefix="engram-latency-") as tmp:
        apps, stubs, channels = {}, {}, []
        for name, unpad in VARIANTS.items():
            data = Path(tmp) / name
            shutil.copytree(source, data)
            config = load_config(env={}, overrides={
                "listen": "127.0.0.1:0", "data_dir": data, "admin_key": ADMIN_KEY,
                "memory": {"audit_searches": False},
                "models": {"reranker": reranker, "cpu_threads": threads}})
            device, speed = resolve_device(config.models.device), {**CPU_SPEED, "unpad": unpad}

            async def start(config=config, device=device, speed=speed):  # type: ignore[no-untyped-def]
                cross_encoder = load_reranker(config, device, speed=speed)
                if cross_encoder is not None:
                    cross_encoder.warmup()
                app = build_app(config, embedder=load_embedder(config, device, speed=speed), reranker=cross_encoder)
                await app.start()
                return app

            apps[name] = asyncio.run_coroutine_threadsafe(start(), loop).result(600)
            channels.append(grpc.insecure_channel(f"127.0.0.1:{apps[name].port}"))
            stubs[name] = sgrpc.MemoryServiceStub(channels[-1])
        info = stubs["unpadded"].Info(spb.InfoRequest(), metadata=meta)
        samples = {(v, d): [] for v in VARIANTS for d in depths}
        rerank_ms = {(v, d): [] for v in VARIANTS for d in depths}
        for i, text in enumerate(texts):
            for d in depths:
                for v, stub in stubs.items():
                    query = pb.SearchQuery(text=f"{text} ({d})", top_k=10, rerank_depth=d if d > 0 else -1)
                    t0 = time.perf_counter()
                    reply = stub.Search(spb.SearchRequest(tenant_id=tenant_name(0), queries=[query]),
                                        metadata=meta, timeout=60)
                    if i >= 3:  # warm-up
                        samples[v, d].append((time.perf_counter() - t0) * 1000)
                        rerank_ms[v, d].append(reply.results[0].timings.rerank_ns / 1e6)
        for channel in channels:
            channel.close()
        for app in apps.values():
            asyncio.run_coroutine_threadsafe(app.stop(), loop).result(120)
    loop.call_soon_threadsafe(loop.stop)

    def rows(variant: str) -> dict:
        return {str(d): {"p50_ms": round(float(np.percentile(samples[variant, d], 50)), 1),
                         "p95_ms": round(float(np.percentile(samples[variant, d], 95)), 1),
                         "rerank_p50_ms": round(float(np.percentile(rerank_ms[variant, d], 50)), 1),
                         "n": len(samples[variant, d])} for d in depths}

    named = info.reranker.name if info.HasField("reranker") else ""
    return {"memories": 10_000, "reranker": reranker, "info_reranker": named, "cpu_threads": threads,
            "depths": rows("unpadded"), "variants": {v: rows(v) for v in VARIANTS}}


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
