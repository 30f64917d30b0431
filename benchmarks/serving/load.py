"""An async gRPC load generator: N closed-loop clients send single-query Search calls for a fixed time."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

import grpc
import numpy as np

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc


STAGES = ("queue", "embed", "ann", "bm25", "fusion", "rerank", "decay", "total")


@dataclass
class LoadResult:
    concurrency: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    rerank_depths: list[int] = field(default_factory=list)   # Timings.rerank_depth_used of each answer
    errors: dict[str, int] = field(default_factory=dict)
    stage_ns: dict[str, int] = field(default_factory=dict)   # summed server-side stage timings

    def summary(self) -> dict[str, float | int | dict[str, int]]:
        lat = np.asarray(self.latencies_ms) if self.latencies_ms else np.zeros(1)
        return {
            "concurrency": self.concurrency, "requests": len(self.latencies_ms), "seconds": round(self.seconds, 3),
            "qps": round(len(self.latencies_ms) / self.seconds, 2) if self.seconds else 0.0,
            "p50_ms": round(float(np.percentile(lat, 50)), 2), "p95_ms": round(float(np.percentile(lat, 95)), 2),
            "p99_ms": round(float(np.percentile(lat, 99)), 2), "mean_ms": round(float(lat.mean()), 2),
            "mean_batch_size": round(float(np.mean(self.batch_sizes)), 2) if self.batch_sizes else 0.0,
            "rerank_depth_used": depth_summary(self.rerank_depths),
            "errors": dict(self.errors),
            "server_stage_mean_ms": {k: round(v / max(1, len(self.latencies_ms)) / 1e6, 2)
                                     for k, v in self.stage_ns.items()},
        }


def depth_summary(depths: list[int]) -> dict[str, float]:
    """The rerank depths the answers used: mean, median, and the share at each end (0 and the largest seen)."""
    if not depths:
        return {}
    d = np.asarray(depths)
    return {"mean": round(float(d.mean()), 2), "p50": float(np.percentile(d, 50)), "min": int(d.min()),
            "max": int(d.max()), "share_zero": round(float((d == 0).mean()), 3),
            "share_max": round(float((d == d.max()).mean()), 3)}


async def run_load(address: str, key: str, *, tenants: list[str], queries: list[str], concurrency: int,
                   seconds: float, rerank_depth: int = -1, seed: int = 0, channels: int = 4) -> LoadResult:
    """Closed loop: each of ``concurrency`` clients sends its next query as soon as the last one returns."""
    metadata = (("authorization", f"Bearer {key}"),)
    chans = [grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
             for _ in range(max(1, min(channels, concurrency)))]
    stubs = [sgrpc.MemoryServiceStub(c) for c in chans]
    result = LoadResult(concurrency=concurrency, seconds=seconds)
    stop_at = time.perf_counter() + seconds

    async def client(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        stub = stubs[i % len(stubs)]
        while time.perf_counter() < stop_at:
            request = spb.SearchRequest(tenant_id=rng.choice(tenants), queries=[
                pb.SearchQuery(text=rng.choice(queries), top_k=10, rerank_depth=rerank_depth)])
            started = time.perf_counter()
            try:
                reply = await stub.Search(request, metadata=metadata, timeout=30)
            except grpc.aio.AioRpcError as exc:
                name = exc.code().name
                result.errors[name] = result.errors.get(name, 0) + 1
                continue
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
            timings = reply.results[0].timings
            result.batch_sizes.append(timings.batch_size)
            result.rerank_depths.append(timings.rerank_depth_used)
            for stage in STAGES:
                result.stage_ns[stage] = result.stage_ns.get(stage, 0) + getattr(timings, f"{stage}_ns")

    began = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    result.seconds = time.perf_counter() - began
    for c in chans:
        await c.close()
    return result


async def touch_tenants(address: str, key: str, tenants: list[str], query: str) -> None:
    """One search per tenant, in turn, so every shard is loaded before anything is measured."""
    metadata = (("authorization", f"Bearer {key}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = sgrpc.MemoryServiceStub(channel)
        for tenant in tenants:
            await stub.Search(spb.SearchRequest(tenant_id=tenant, queries=[pb.SearchQuery(text=query)]),
                              metadata=metadata, timeout=300)
