"""Search latency of each quality row's stage, at the server's defaults, on the cached 10k-memory tenant.

``python -m benchmarks.quality.latency [--queries 60]``: one real server at its defaults (the shipped
embedder, cross-encoder and calibration) over a copy of ``make bench-serving``'s 10k-memory tenant (built
there once: SciFact-derived memories); one query per Search, sequential (one client), distinct query texts
(no embedding-cache hits; SciFact train claims). Every stage runs each query in turn, interleaved, so load
from other processes falls on all of them alike. The stages are the quality table's rows, sent the same
way the quality harness sends them: ``bm25`` (``lexical_only``), ``dense`` (``dense_only``), ``hybrid``
(those three with ``rerank_depth = -1``), ``defaults`` (no override). A second server with the second retrieval round on
(``search.feedback_docs`` 3, weak threshold 1: every query takes it) gives the ``+ second round`` row.
Writes ``benchmarks/results/quality/latency.json``; ``benchmarks.quality.report`` puts the p50/p95 beside
each row of the README's quality table.

``--rerank-dtypes auto,float32,int8`` instead starts one server per cross-encoder dtype (``models.rerank_dtype``;
``auto`` = the server's default), each at its own default rerank depth, and times the ``hybrid`` and ``defaults``
stages of each, interleaved the same way (``--out`` names the file). Every row also gives the rerank depth the
server used (``Timings.rerank_depth_used``: the controller's, ``search.latency_target_ms`` being on here as it is
when served). The tenant is built when missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from benchmarks.ingest.run import command_line, cpu_model
from benchmarks.quality.datasets import load_scifact, repo_root
from benchmarks.serving.build import ADMIN_KEY, build, dataset_dir, tenant_name
from server.app import build_app
from server.config import load_config
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc

OUT = repo_root() / "benchmarks" / "results" / "quality" / "latency.json"
STAGES: dict[str, dict[str, Any]] = {
    "bm25": {"lexical_only": True, "rerank_depth": -1}, "dense": {"dense_only": True, "rerank_depth": -1},
    "hybrid": {"rerank_depth": -1}, "defaults": {},
}
# The second round for every query (SearchQuery.feedback: the server's 3 feedback docs, whatever the first round's
# relevance), on the defaults' server.
SERVERS: dict[str, dict[str, Any]] = {"defaults": {}}
ROUNDS: dict[str, dict[str, Any]] = {"defaults + second round": {"feedback": True}}


def measure(*, queries: int, rerank_dtypes: list[str] | None = None) -> dict:
    source = dataset_dir(tenants=1, per_tenant=10_000)
    if not (source / "complete.json").is_file():
        from benchmarks.serving.run import load_embedder_for_build
        build(load_embedder_for_build("cpu"), tenants=1, per_tenant=10_000)
    servers: dict[str, dict[str, Any]] = SERVERS
    stages, rounds = STAGES, ROUNDS
    if rerank_dtypes:
        servers = {f"rerank {d}": {"models": {"rerank_dtype": "" if d == "auto" else d}} for d in rerank_dtypes}
        stages, rounds = {k: STAGES[k] for k in ("hybrid", "defaults")}, {}
    texts = [q.text for q in load_scifact(split="train").queries][:queries + 3]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    meta = (("authorization", f"Bearer {ADMIN_KEY}"),)
    runs: list[tuple[str, sgrpc.MemoryServiceStub, dict[str, Any]]] = []
    described: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="engram-stage-latency-") as tmp:
        apps, channels = [], []
        for name, overrides in servers.items():
            data = Path(tmp) / name.replace(" ", "-")
            shutil.copytree(source, data)
            config = load_config(env={}, overrides={"listen": "127.0.0.1:0", "data_dir": data, "admin_key": ADMIN_KEY,
                                                    "memory": {"audit_searches": False}, **overrides})

            async def start(config=config):  # type: ignore[no-untyped-def]
                app = build_app(config)
                await app.start()
                return app

            apps.append(asyncio.run_coroutine_threadsafe(start(), loop).result(600))
            channels.append(grpc.insecure_channel(f"127.0.0.1:{apps[-1].port}"))
            stub = sgrpc.MemoryServiceStub(channels[-1])
            prefix = f"{name}: " if rerank_dtypes else ""
            runs += [(prefix + stage, stub, fields) for stage, fields in {**stages, **rounds}.items()]
            pipeline = apps[-1].engine.search_pipeline
            about = pipeline.reranker.describe() if pipeline.reranker else {}
            described[name] = {"rerank_depth": pipeline.default_rerank_depth,
                               **{k: about[k] for k in ("name", "dtype", "batch_size", "traced") if k in about}}
        samples: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        depths: dict[str, list[int]] = {name: [] for name, _, _ in runs}   # the controller's depth per query
        for i, text in enumerate(texts):
            for name, stub, fields in runs:
                query = pb.SearchQuery(text=f"{text} [{name}]", top_k=10, **fields)
                t0 = time.perf_counter()
                resp = stub.Search(spb.SearchRequest(tenant_id=tenant_name(0), queries=[query]), metadata=meta,
                                   timeout=60)
                if i >= 3:   # warm-up
                    samples[name].append((time.perf_counter() - t0) * 1000)
                    depths[name].append(resp.results[0].timings.rerank_depth_used)
        for channel in channels:
            channel.close()
        for app in apps:
            asyncio.run_coroutine_threadsafe(app.stop(), loop).result(120)
    loop.call_soon_threadsafe(loop.stop)
    return {"memories": 10_000, "queries": queries, "clients": 1, "servers": described,
            "stages": {name: {"p50_ms": round(float(np.percentile(s, 50)), 1),
                              "p95_ms": round(float(np.percentile(s, 95)), 1), "n": len(s),
                              "rerank_depth_used": {"mean": round(float(np.mean(depths[name])), 2),
                                                    "min": int(np.min(depths[name])), "max": int(np.max(depths[name]))}}
                       for name, s in samples.items()}}


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=60)
    p.add_argument("--rerank-dtypes", default="", help="comma-separated models.rerank_dtype values, one server each")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result = measure(queries=args.queries, rerank_dtypes=[d for d in args.rerank_dtypes.split(",") if d])
    result = {"date": started, "machine": f"{cpu_model()}, {os.cpu_count()} cores",
              "command": command_line(), **result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
