"""Write acknowledgement latency: closed-loop clients of one-memory Writes over gRPC, and group commits of
one memory straight into a TenantStore whose log is the local file (fsync) or the bucket (one conditional
PUT per commit), interleaved so that load on the machine hits both alike."""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import LoadResult
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc


async def run_writes(address: str, key: str, *, tenant: str, concurrency: int, seconds: float,
                     tag: str) -> LoadResult:
    """``concurrency`` clients each send a one-memory Write as soon as the last was acknowledged."""
    metadata = (("authorization", f"Bearer {key}"),)
    result = LoadResult(concurrency=concurrency, seconds=seconds)
    texts = query_texts(2000, seed=7)
    stop_at = time.perf_counter() + seconds
    async with grpc.aio.insecure_channel(address) as channel:
        stub = sgrpc.MemoryServiceStub(channel)

        async def client(i: int) -> None:
            rng = random.Random(i)
            n = 0
            while time.perf_counter() < stop_at:
                content = f"{tag} writer {i} note {n}: {rng.choice(texts)}"   # unique: no near-duplicate merge
                n += 1
                started = time.perf_counter()
                try:
                    await stub.Write(spb.WriteRequest(tenant_id=tenant, memories=[pb.MemoryInput(content=content)]),
                                     metadata=metadata, timeout=30)
                except grpc.aio.AioRpcError as exc:
                    result.errors[exc.code().name] = result.errors.get(exc.code().name, 0) + 1
                    continue
                result.latencies_ms.append((time.perf_counter() - started) * 1000)

        began = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(concurrency)))
        result.seconds = time.perf_counter() - began
    return result


def _memory(i: int) -> Any:
    from server.domain import Memory, MemoryStatus, MemoryType

    now = int(time.time() * 1000)
    return Memory(memory_id=f"m_{i:07d}", doc_id=i, content=f"commit benchmark memory {i}", type=MemoryType.EPISODIC,
                  importance=0.5, created_at_ms=now, last_access_at_ms=now, access_count=0, entities=(),
                  source_ref="", scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(),
                  superseded_by="", pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=now)


def store_commits(backend: Any, *, commits: int, dim: int = 384) -> dict[str, list[float]]:
    """Milliseconds per one-memory group commit into a TenantStore on the local log (write + fsync) and on the
    object log (one ``If-None-Match: *`` PUT), alternating commit by commit."""
    from server.store.memory_store import TenantStore

    rng = np.random.default_rng(0)
    out: dict[str, list[float]] = {"local_fsync": [], "object_store": []}
    with tempfile.TemporaryDirectory(prefix="engram-commits-") as tmp:
        for d in ("local", "object"):
            (Path(tmp) / d).mkdir()
        stores = {"local_fsync": TenantStore.open(Path(tmp) / "local", dim=dim)[0],
                  "object_store": TenantStore.open(Path(tmp) / "object", dim=dim,
                                                   open_log=backend.opener(f"commit-bench-{time.time_ns()}"))[0]}
        try:
            for i in range(1, commits + 1):
                for name, store in stores.items():
                    vec = rng.standard_normal(dim).astype(np.float32)
                    started = time.perf_counter()
                    store.commit(puts=[(_memory(i), vec / np.linalg.norm(vec))])
                    out[name].append((time.perf_counter() - started) * 1000)
        finally:
            for store in stores.values():
                store.close()
    return out
