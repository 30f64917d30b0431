"""The direct data path of engram on Ray (server/cluster/direct.py): a replica's method answers only its token's
holders, the edge routes only to a published and connected replica, and a model stand-in uses a model replica's
direct method, falling back to the Serve handle once it fails."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import grpc
import numpy as np
import pytest

from server.cluster.direct import MODEL_CALL, SHARD_CALL, DirectServer, ShardChannels, Target, metadata, ring_owner
from server.cluster import remote_models
from server.cluster.remote_models import ModelTargets, RemoteEmbedder


def test_a_direct_call_needs_the_replicas_token() -> None:
    seen: list[bytes] = []

    async def handle(body: bytes) -> bytes:
        seen.append(body)
        return body[::-1]

    async def scenario() -> None:
        server = DirectServer(SHARD_CALL, handle)
        target = await server.start("127.0.0.1")
        async with grpc.aio.insecure_channel(target.address) as channel:
            call = channel.unary_unary(SHARD_CALL)
            assert await call(b"abc", metadata=metadata(target.token), timeout=10) == b"cba"
            for token in ("0" * 32, ""):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await call(b"xyz", metadata=metadata(token), timeout=10)
                assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        await server.stop(None)

    asyncio.run(scenario())
    assert seen == [b"abc"]   # the refused calls never reached the handler


def test_the_edge_routes_only_to_a_published_connected_replica() -> None:
    async def handle(body: bytes) -> bytes:
        return body

    async def scenario() -> None:
        server = DirectServer(SHARD_CALL, handle)
        target = await server.start("127.0.0.1")
        channels = ShardChannels()
        assert channels.update([{"replica": "r1", "direct": target.as_dict()}, {"replica": "r2"}]) == []
        assert channels.route(None) is None and channels.route("r2") is None   # no record of a direct method
        for _ in range(200):   # connects in the background; until then the Serve path
            if channels.route("r1") is not None:
                break
            await asyncio.sleep(0.02)
        route = channels.route("r1")
        assert route is not None and route[0] == target
        assert await route[1](b"hi", metadata=metadata(target.token), timeout=10) == b"hi"
        channel = channels.drop(target.address)   # its call failed: the Serve path until the next record
        assert channel is not None and channels.route("r1") is None
        await channel.close()
        gone = ShardChannels()
        gone.update([{"replica": "r1", "direct": target.as_dict()}])
        closed = gone.update([])   # the replica's record went stale
        assert len(closed) == 1 and gone.route("r1") is None
        await closed[0].close()
        await server.stop(None)

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

    async def forward(body: bytes) -> bytes:
        items, traces = json.loads(body)
        return np.asarray([[len(t)] * dim for t in items], dtype=np.float32).tobytes()

    async def scenario() -> None:
        server = DirectServer(MODEL_CALL, forward)
        target = await server.start("127.0.0.1")
        asked: list[int] = []

        def discover() -> list[Target]:
            asked.append(1)
            return []   # the replica went away: none left to ask

        handle = _ServeHandle(dim)
        embedder = RemoteEmbedder(handle, {"name": "m", "device": "cpu", "max_length": 16, "describe": {}, "dim": dim},
                                  ModelTargets(discover, found=[target]))
        rows = await asyncio.to_thread(embedder.embed, ["a", "abc"])
        assert rows.shape == (2, dim) and rows[:, 0].tolist() == [1.0, 3.0] and handle.calls == 0
        await server.stop(None)
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
