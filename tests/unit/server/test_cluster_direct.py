"""The direct data path of engram on Ray (server/cluster/direct.py): a replica's method answers only its token's
holders, the edge routes only to a published replica it reached, and a model stand-in uses a model replica's
direct method, falling back to the Serve handle once it fails."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from server.cluster.direct import HopFailed, Target, ring_owner
from server.cluster import remote_models
from server.cluster.frames import FrameServer
from server.cluster.streams import ShardLinks, StreamClient, StreamServer
from server.cluster.remote_models import ModelTargets, RemoteEmbedder


def test_a_direct_call_needs_the_replicas_token() -> None:
    seen: list[bytes] = []

    async def handle(body: bytes) -> bytes:
        seen.append(body)
        if body == b"boom":
            raise RuntimeError("the handler failed")
        return body[::-1]

    async def scenario() -> None:
        server = StreamServer(handle)
        target = await server.start("127.0.0.1")
        client = StreamClient(target)
        assert await client.call(b"abc", timeout=10) == b"cba"
        big = bytes(range(256)) * 20_000   # several MB each way
        assert await client.call(big, timeout=10) == big[::-1]
        with pytest.raises(HopFailed) as failed:
            await client.call(b"boom", timeout=10)
        assert failed.value.code == "INTERNAL"
        assert await asyncio.gather(*(client.call(bytes([i]) * 3, timeout=10) for i in range(5))) == [
            bytes([i]) * 3 for i in range(5)]   # concurrent calls: a connection each
        for token in ("0" * 32, "f" * 40):
            with pytest.raises(HopFailed) as refused:
                await StreamClient(Target(address=target.address, token=token)).call(b"xyz", timeout=10)
            assert refused.value.code == "UNAVAILABLE"
        client.close()
        await server.stop(None)

    asyncio.run(scenario())
    assert b"xyz" not in seen   # the refused calls never reached the handler


def test_a_direct_call_fails_on_its_deadline_and_a_stopping_server_answers_its_calls_first() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()

        async def handle(body: bytes) -> bytes:
            await gate.wait()
            return body

        server = StreamServer(handle)
        target = await server.start("127.0.0.1")
        client = StreamClient(target)
        with pytest.raises(HopFailed) as late:
            await client.call(b"slow", timeout=0.2)
        assert late.value.deadline
        running = asyncio.ensure_future(client.call(b"in flight", timeout=10))
        await asyncio.sleep(0.1)
        stopping = asyncio.ensure_future(server.stop(5.0))
        await asyncio.sleep(0.1)
        gate.set()
        assert await running == b"in flight"   # answered within the grace
        await stopping
        await asyncio.sleep(0.1)   # the client's loop sees its idle connection closed
        with pytest.raises(HopFailed) as gone:
            await client.call(b"after", timeout=5)
        # It never left (the closed connection set aside, a new one refused): even a Write may go through Serve.
        assert gone.value.code == "UNAVAILABLE" and not gone.value.sent

    asyncio.run(scenario())


def test_the_edge_routes_only_to_a_published_reached_replica() -> None:
    async def handle(body: bytes) -> bytes:
        return body

    async def scenario() -> None:
        server = StreamServer(handle)
        target = await server.start("127.0.0.1")
        links = ShardLinks()
        links.update([{"replica": "r1", "direct": target.as_dict()}, {"replica": "r2"}])
        assert links.route(None) is None and links.route("r2") is None   # no record of a direct method
        for _ in range(200):   # connects in the background; until then the Serve path
            if links.route("r1") is not None:
                break
            await asyncio.sleep(0.02)
        client = links.route("r1")
        assert client is not None and client.target == target
        assert await client.call(b"hi", timeout=10) == b"hi"
        links.drop(target.address)   # its call failed: the Serve path until the next record
        assert links.route("r1") is None
        links.update([{"replica": "r1", "direct": target.as_dict()}])   # the next record: reached again
        for _ in range(200):
            if links.route("r1") is not None:
                break
            await asyncio.sleep(0.02)
        assert links.route("r1") is not None
        links.update([])   # the replica's record went stale
        assert links.route("r1") is None
        await server.stop(None)
        links.update([{"replica": "r1", "direct": target.as_dict()}])   # a record of a replica that is gone
        await asyncio.sleep(0.2)
        assert links.route("r1") is None   # never reached: never routed to

    asyncio.run(scenario())


def test_ring_owner_is_none_without_a_consistent_hash_router() -> None:
    assert ring_owner(SimpleNamespace(), "tenant") is None
    ring = SimpleNamespace(_lookup_ranked_replicas=lambda key: [SimpleNamespace(unique_id=f"owner-of-{key}")])
    handle = SimpleNamespace(_router=SimpleNamespace(_asyncio_router=SimpleNamespace(request_router=ring)))
    assert ring_owner(handle, "t1") == "owner-of-t1"


class _ServeHandle:
    """The Serve path of a model deployment, as a RemoteEmbedder calls it: ``embed.remote(items, traces)``."""

    def __init__(self, dim: int) -> None:
        self.calls = 0
        self.embed = SimpleNamespace(remote=self._remote)
        self.dim = dim

    def _remote(self, items: list[str], traces: list[Any]) -> Any:
        self.calls += 1
        rows = np.full((len(items), self.dim), -1.0, dtype=np.float32)
        return SimpleNamespace(result=lambda timeout_s: rows)


def test_a_model_stand_in_uses_the_direct_method_then_falls_back_to_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    dim = 4

    def forward(body: bytes) -> bytes:
        items, traces = json.loads(body)
        return np.asarray([[len(t)] * dim for t in items], dtype=np.float32).tobytes()

    async def scenario() -> None:
        server = FrameServer(forward)
        target = server.start("127.0.0.1")
        asked: list[int] = []

        def discover() -> list[Target]:
            asked.append(1)
            return []   # the replica went away: none left to ask

        handle = _ServeHandle(dim)
        embedder = RemoteEmbedder(handle, {"name": "m", "device": "cpu", "max_length": 16, "describe": {}, "dim": dim},
                                  ModelTargets(discover, found=[target]))
        rows = await asyncio.to_thread(embedder.embed, ["a", "abc"])
        assert rows.shape == (2, dim) and rows[:, 0].tolist() == [1.0, 3.0] and handle.calls == 0
        server.stop()
        rows = await asyncio.to_thread(embedder.embed, ["a", "abc"])   # the direct call fails: sent through Serve
        assert rows.shape == (2, dim) and rows[0, 0] == -1.0 and handle.calls == 1
        rows = await asyncio.to_thread(embedder.embed, ["x"])   # none left: Serve, not asked again at once
        assert handle.calls == 2 and asked == []
        remote_models.RETRY_S = 0.0
        rows = await asyncio.to_thread(embedder.embed, ["x"])   # asked again on a thread of its own; Serve meanwhile
        assert handle.calls == 3
        for _ in range(250):
            if asked:
                break
            await asyncio.sleep(0.02)
        assert asked == [1]

    monkeypatch.setattr(remote_models, "RETRY_S", remote_models.RETRY_S)   # restored after the test
    asyncio.run(scenario())


@pytest.mark.slow   # the edge (server.cluster.ingress) imports ray: the cluster extra that make test-slow installs
def test_the_edge_counts_its_calls_by_path_for_metrics() -> None:
    """/metrics at the edge: direct calls answered, refused (then through Serve) and failed (a read then through
    Serve), by method, and the Serve path's calls; no tenant label."""
    pytest.importorskip("ray", reason="the cluster extra (requirements-cluster.txt) is not installed")
    import pickle
    from dataclasses import dataclass

    from prometheus_client import CollectorRegistry, generate_latest

    from server.cluster.board import HopCollector
    from server.cluster.direct import Refused
    from server.cluster.ingress import ClusterEngine
    from server.config import ServerConfig
    from server.domain import KeyScope

    async def handle(body: bytes) -> bytes:
        method = pickle.loads(body)[0]
        if method == "history":
            raise RuntimeError("the replica broke mid-call")
        return pickle.dumps(Refused("not loaded here") if method == "get" else f"direct {method}")

    @dataclass(frozen=True)
    class Settings:
        k: float | None = None

    async def through_serve(*request: Any) -> str:
        return f"serve {request[0]}"

    ring = SimpleNamespace(_lookup_ranked_replicas=lambda key: [SimpleNamespace(unique_id="r1")])
    shards = SimpleNamespace(_router=SimpleNamespace(_asyncio_router=SimpleNamespace(request_router=ring)),
                             options=lambda **_: SimpleNamespace(call=SimpleNamespace(remote=through_serve)))
    catalog = SimpleNamespace(settings=lambda tenant_id: Settings(), has_tenant=lambda tenant_id: True)

    async def scenario() -> tuple[list[str], str]:
        server = StreamServer(handle)
        target = await server.start("127.0.0.1")
        engine = ClusterEngine(config=ServerConfig(), shards=shards, catalog=catalog, info={})  # type: ignore[arg-type]
        engine.channels.update([{"replica": "r1", "direct": target.as_dict()}])
        for _ in range(200):
            if engine.channels.route("r1") is not None:
                break
            await asyncio.sleep(0.02)
        admin = KeyScope(key_id="k", name="admin", tenant_ids=frozenset(), tenant_prefixes=(), admin=True)
        out = [await engine.search(admin, "tenant-a", []), await engine.search(admin, "tenant-b", []),
               await engine.get(admin, "tenant-a", ["m1"]), await engine.history(admin, "tenant-a", "m1"),
               await engine.search(admin, "tenant-a", [])]   # the channel was dropped after the failure
        await server.stop(None)
        registry = CollectorRegistry()
        registry.register(HopCollector(lambda: engine.hop_counts))
        return out, generate_latest(registry).decode()

    out, text = asyncio.run(scenario())
    assert out == ["direct search", "direct search", "serve get", "serve history", "serve search"]
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("engram_cluster_") and "_total" in line and not line.startswith("#")}
    assert samples == {
        'engram_cluster_direct_calls_total{method="search",outcome="answered"}': 2.0,
        'engram_cluster_direct_calls_total{method="get",outcome="refused"}': 1.0,
        'engram_cluster_direct_calls_total{method="history",outcome="failed"}': 1.0,
        'engram_cluster_serve_calls_total{method="get"}': 1.0,
        'engram_cluster_serve_calls_total{method="history"}': 1.0,
        'engram_cluster_serve_calls_total{method="search"}': 1.0}
    assert "tenant-a" not in text and "tenant-b" not in text
