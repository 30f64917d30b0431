"""Recall latency through MCP vs straight over gRPC, side by side at one client.

    .venv/bin/python -m benchmarks.integrations.mcp_latency [--memories 2000] [--queries 200]

One ``engram serve`` at its defaults (shipped reranker, batching on) holds one tenant of synthetic agent
memories (``benchmarks.serving.corpus``). One asyncio client process then recalls the same queries three
ways, interleaved query by query in a rotating order so that machine load falls on all alike: the SDK's
``AsyncEngramClient.recall`` (direct gRPC), ``engram mcp`` over stdio (the MCP SDK's client spawning the
command, as a desktop agent does) and ``engram mcp --transport http`` (streamable HTTP, bearer key). Each
MCP recall is checked to return the ids the direct one did. Besides wall time, ``outside_server`` is wall
time minus the server's own ``total_ns`` for that search: the transport's share, less noisy than the
difference of two wall times when the search itself varies with machine load. Writes
``benchmarks/results/integrations/mcp_latency.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from benchmarks.serving.build import ADMIN_KEY
from benchmarks.serving.corpus import memories, query_texts, sentence_pool
from benchmarks.serving.run import ServerProcess
from engram_client import AsyncEngramClient, EngramClient

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "integrations"
TENANT = "bench/agent"
ENGRAM = str(Path(sys.executable).with_name("engram"))


def seed(address: str, n: int) -> str:
    """Creates the tenant with ``n`` memories; returns a key scoped to it."""
    with EngramClient(address, key=ADMIN_KEY, timeout_s=600) as admin:
        admin.create_tenant(TENANT)
        texts = [text for text, _ in memories(n, sentence_pool(max(2 * n, 400)), seed=11)]
        for at in range(0, n, 256):
            admin.write(TENANT, texts[at:at + 256], type="episodic")
        return str(admin.create_key("bench", tenant_ids=[TENANT]).secret)


def http_mcp(address: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([ENGRAM, "mcp", "--transport", "http", "--address", address, "--listen", "127.0.0.1:0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "streamable HTTP at " not in line:
        raise RuntimeError(f"engram mcp --transport http did not start: {line!r}")
    return proc, line.split("streamable HTTP at ")[1].strip()


def summary(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": round(float(np.percentile(a, 50)), 3), "p95_ms": round(float(np.percentile(a, 95)), 3),
            "mean_ms": round(float(a.mean()), 3), "min_ms": round(float(a.min()), 3), "n": len(ms)}


async def measure(address: str, key: str, queries: list[str], *, top_k: int, warmup: int) -> dict[str, Any]:
    proc, url = http_mcp(address)
    params = StdioServerParameters(command=ENGRAM, args=["mcp", "--address", address, "--key", key], cwd=str(ROOT))
    try:
        async with AsyncEngramClient(address, key=key) as direct, Client(params) as stdio, \
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http_session, \
                Client(streamable_http_client(url, http_client=http_session)) as http:
            async def grpc_recall(q: str) -> tuple[list[str], float]:
                recalled = await direct.recall(TENANT, q, top_k=top_k)
                return [h.memory.memory_id for h in recalled.hits], recalled.timings.total_ns / 1e6

            def over(client: Client) -> Callable[[str], Awaitable[tuple[list[str], float]]]:
                async def recall(q: str) -> tuple[list[str], float]:
                    result = await client.call_tool("recall", {"query": q, "top_k": top_k})
                    assert not result.is_error, result.content
                    data = result.structured_content
                    return [h["memory_id"] for h in data["hits"]], float(data["took_ms"])
                return recall

            variants = {"grpc_sdk": grpc_recall, "mcp_stdio": over(stdio), "mcp_http": over(http)}
            for q in queries[:warmup]:
                for fn in variants.values():
                    await fn(q)
            times: dict[str, list[float]] = {name: [] for name in variants}
            outside: dict[str, list[float]] = {name: [] for name in variants}  # wall time minus the server's
            mismatches = 0
            names = list(variants)
            for i, q in enumerate(queries[warmup:]):
                got: dict[str, list[str]] = {}
                for name in names[i % 3:] + names[:i % 3]:  # rotate who goes first
                    started = time.perf_counter()
                    got[name], server_ms = await variants[name](q)
                    times[name].append((time.perf_counter() - started) * 1000)
                    outside[name].append(times[name][-1] - server_ms)
                mismatches += int(not got["grpc_sdk"] == got["mcp_stdio"] == got["mcp_http"])
    finally:
        proc.terminate()
        proc.wait(30)
    out: dict[str, Any] = {name: {**summary(ms), "outside_server": summary(outside[name])}
                           for name, ms in times.items()}
    for name in ("mcp_stdio", "mcp_http"):
        out[name]["overhead_p50_ms"] = round(out[name]["p50_ms"] - out["grpc_sdk"]["p50_ms"], 3)
        out[name]["overhead_outside_server_p50_ms"] = round(
            out[name]["outside_server"]["p50_ms"] - out["grpc_sdk"]["outside_server"]["p50_ms"], 3)
    out["id_mismatches"] = mismatches
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "mcp_latency.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "data"
        empty.mkdir()
        server = ServerProcess(empty, batching=True, env={}, workdir=Path(tmp) / "run")
        try:
            info = server.wait_ready()
            key = seed(server.address, args.memories)
            queries = query_texts(args.queries + args.warmup, seed=7)
            result = asyncio.run(measure(server.address, key, queries, top_k=args.top_k, warmup=args.warmup))
        finally:
            server.stop()
    report = {"what": "recall latency at one client: direct gRPC (SDK) vs engram mcp over stdio and HTTP",
              "server": info, "memories": args.memories, "queries": args.queries, "top_k": args.top_k,
              "platform": platform.platform(), "results": result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["results"], indent=2))


if __name__ == "__main__":
    main()
