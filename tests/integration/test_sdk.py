"""The Python SDK against the real in-process server: typed calls, paging, agent helpers, retries."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from support import ADMIN_KEY, start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_client import NO_RETRY, AsyncEngramClient, EngramClient, RetryPolicy

ROOT = Path(__file__).resolve().parents[2]
FAST_RECONNECT = (("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50),
                  ("grpc.max_reconnect_backoff_ms", 200))


def test_sdk_imports_only_grpc_and_protobuf() -> None:
    code = ("import sys, engram_client, engram_client.aio; "
            "print(','.join(m for m in ('torch', 'faiss', 'jnius', 'numpy', 'transformers', 'prometheus_client', "
            "'server', 'server.engine', 'server.config') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the SDK pulled in server dependencies: {out.stdout}"


def test_sync_client_covers_every_rpc(server) -> None:
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        assert engram.info().embedder.dim == 384
        assert engram.create_tenant("acme/bob", initial=["Bob's favourite colour is green"]).initial_memories == 1
        reply = engram.write("acme/bob", ["Bob is allergic to peanuts",
                                          {"content": "Bob met Carol in Lisbon", "type": "episodic",
                                           "entities": ["carol"]},
                                          "Bob runs on Tuesdays", "Bob's laptop is a ThinkPad"],
                             importance=0.7, source_ref="turn-1")
        assert [r.outcome for r in reply.results] == [spb.WRITE_OUTCOME_CREATED] * 4
        hit = engram.search("acme/bob", "peanut allergy", top_k=2).hits[0]
        assert hit.memory.content == "Bob is allergic to peanuts" and hit.memory.source_ref == "turn-1"
        assert hit.breakdown.final > 0
        only_carol = engram.search("acme/bob", "who did Bob meet", filter={"entities_any": ["carol"]})
        assert [h.memory.content for h in only_carol.hits] == ["Bob met Carol in Lisbon"]
        both = engram.search_many("acme/bob", ["laptop", "running"], top_k=1)
        assert [r.hits[0].memory.content for r in both] == ["Bob's laptop is a ThinkPad", "Bob runs on Tuesdays"]

        listed = list(engram.iter_memories("acme/bob", page_size=2))  # 5 memories → 3 pages
        assert len(listed) == 5 and len({m.memory_id for m in listed}) == 5
        episodic = list(engram.iter_memories("acme/bob", filter={"types": ["episodic"]}))
        assert [m.content for m in episodic] == ["Bob met Carol in Lisbon"]
        ids = [r.memory_id for r in reply.results]
        assert [m.content for m in engram.get("acme/bob", ids[:1]).memories] == ["Bob is allergic to peanuts"]
        assert engram.delete("acme/bob", [ids[3], "nope"]).deleted == 1
        assert "acme/bob" in engram.list_tenants()

        scoped = engram.create_key("bob-agent", tenant_ids=["acme/bob"])
        with EngramClient(server.address, key=scoped.secret) as bob:
            assert bob.list_tenants() == ["acme/bob"]
            with pytest.raises(grpc.RpcError) as denied:
                bob.create_tenant("acme/eve")
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_recall_and_remember_close_the_agent_loop(server) -> None:
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        engram.create_tenant("u1")
        assert not engram.recall("u1", "what does the user eat?")  # nothing yet
        written = engram.remember("u1", "The user is vegetarian", type="semantic", importance=0.9,
                                  source_ref="chat-7#3")
        assert written.outcome == spb.WRITE_OUTCOME_CREATED
        engram.remember("u1", "The user asked about train times to Porto")
        recalled = engram.recall("u1", "what food does the user eat?", top_k=1)
        assert [m.content for m in recalled.memories] == ["The user is vegetarian"]
        assert "The user is vegetarian" in recalled.context
        assert recalled.timings.total_ns > 0
        assert not engram.recall("u1", "what food does the user eat?", min_score=2.0)  # final ≤ 1


def test_async_client_same_api(server) -> None:
    async def run() -> tuple[list[str], list[str], int]:
        async with AsyncEngramClient(server.address, key=ADMIN_KEY) as engram:
            await engram.create_tenant("async/t")
            await engram.write("async/t", [f"note number {i} about topic {i % 3}" for i in range(7)])
            seen = [m.content async for m in engram.iter_memories("async/t", page_size=3)]
            recalled = await engram.recall("async/t", "note number 4", top_k=1)
            tenants = await engram.list_tenants()
            info = await engram.info()
            return seen, [*tenants, recalled.memories[0].content], info.limits.max_top_k

    seen, rest, max_top_k = asyncio.run(run())
    assert len(seen) == 7 and rest == ["async/t", "note number 4 about topic 1"] and max_top_k > 0


def test_unavailable_is_retried_with_backoff_then_raised() -> None:
    port = _free_port()
    slept: list[float] = []
    policy = RetryPolicy(max_attempts=4, initial_backoff_s=0.01, max_backoff_s=0.05)
    with EngramClient(f"127.0.0.1:{port}", key="k", retry=policy, sleep=slept.append, timeout_s=10) as engram:
        with pytest.raises(grpc.RpcError) as failed:
            engram.info()
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        assert len(slept) == 3 and all(0 <= s <= 0.05 for s in slept)
        slept.clear()
        with pytest.raises(grpc.RpcError):
            engram.call("Info", spb.InfoRequest(), retry=NO_RETRY)
        assert slept == []
        with pytest.raises(ValueError, match="no RPC named 'Infoo'"):
            engram.call("Infoo", spb.InfoRequest())


def test_retries_reach_a_server_that_starts_late(tmp_path: Path, jvm: None, embedder) -> None:
    port = _free_port()
    started: list = []
    thread = threading.Thread(target=lambda: (time.sleep(1.0), started.append(
        start_server(tmp_path / "data", embedder=embedder, listen=f"127.0.0.1:{port}"))))
    thread.start()
    try:
        slept: list[float] = []
        policy = RetryPolicy(max_attempts=200, initial_backoff_s=0.05, max_backoff_s=0.2)
        with EngramClient(f"127.0.0.1:{port}", key=ADMIN_KEY, retry=policy, options=FAST_RECONNECT,
                          sleep=lambda s: (slept.append(s), time.sleep(s))[1], timeout_s=120) as engram:
            assert engram.info().embedder.dim == 384
        assert slept, "the first attempts should have failed while the server was down"
    finally:
        thread.join(120)
        for running in started:
            running.stop()


def test_deadline_exceeded_is_not_retried(server) -> None:
    slept: list[float] = []
    with EngramClient(server.address, key=ADMIN_KEY, sleep=slept.append) as engram:
        engram.create_tenant("slow")
        with pytest.raises(grpc.RpcError) as failed:
            engram.search("slow", "anything", timeout_s=0.000_001)
        assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and slept == []
        assert engram.search("slow", "anything").hits == []  # the client still works afterwards
        assert isinstance(engram.search("slow", "x", scoring={"disable_decay": True}), pb.QueryResult)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
