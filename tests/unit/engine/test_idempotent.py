"""Idempotent calls on a real shard (server/engine/idempotent.py): a key answers from its record, another
request with it is refused, a call whose client left keeps its key (and its shard, from eviction) until its
work ends (a duplicate waits for it and is answered from its record), a failed call leaves the key free,
and a reloaded shard answers."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from engine_support import T0, make_shard, write

from server.config import ServerConfig
from server.domain import AuditOp, MemoryInput
from server.engine import idempotent
from server.engine.memories import Memories
from server.errors import InvalidArgument, NotFound
from server.tenants.shard import TenantShard

MEMORIES = Memories(config=ServerConfig())


def deletes(shard: TenantShard) -> int:
    entries, _ = shard.audit.read(after=0, limit=1000, ops=frozenset({AuditOp.DELETE}), memory_id="")
    return len(entries)


def delete_once(shard: TenantShard, ids: list[str], key: str, *, pool: ThreadPoolExecutor,
                gate: threading.Event | None = None) -> asyncio.Future[tuple[int, list[str]]]:
    call = idempotent.call_of("delete", key, ids)

    def work() -> tuple[int, list[str]]:
        if gate is not None:
            assert gate.wait(10)
        return MEMORIES.delete(shard, ids, key_id="k", now_ms=T0, call=call)

    async def run() -> tuple[int, list[str]]:
        return await asyncio.get_running_loop().run_in_executor(pool, work)

    return asyncio.ensure_future(idempotent.once(shard, call, run, replay=idempotent.count_result, now_ms=T0))


def test_a_duplicate_waits_for_a_call_whose_client_left(tmp_path: Path) -> None:
    shard = make_shard(tmp_path)
    ids = [r.memory_id for r in write(shard, [MemoryInput(content="a"), MemoryInput(content="b")], now_ms=T0)]
    gate = threading.Event()

    async def scenario() -> tuple[tuple[int, list[str]], tuple[int, list[str]]]:
        with ThreadPoolExecutor(2) as pool:
            first = delete_once(shard, [ids[0], "m_x"], "d1", pool=pool, gate=gate)
            await asyncio.sleep(0.05)
            first.cancel()                      # the client went away; the commit on its thread goes on
            second = delete_once(shard, [ids[0], "m_x"], "d1", pool=pool)
            await asyncio.sleep(0.05)
            assert not second.done()            # it waits for the first call's work, not for its client
            assert not shard.evictable()        # a reload would not know the call running here
            gate.set()
            answer = await second
            with pytest.raises(asyncio.CancelledError):
                await first
            again = await delete_once(shard, [ids[0], "m_x"], "d1", pool=pool)
            await asyncio.sleep(0)              # the done callbacks release the key
            assert shard.calls_in_flight == {} and shard.evictable()
            return answer, again

    answer, again = asyncio.run(scenario())
    assert answer == again == (1, ["m_x"])      # a second delete that ran would answer (0, [ids[0], "m_x"])
    assert deletes(shard) == 1 and shard.store.get(ids[1]) is not None


def test_a_failed_call_leaves_the_key_free_and_another_request_is_refused(tmp_path: Path) -> None:
    shard = make_shard(tmp_path)
    ids = [r.memory_id for r in write(shard, [MemoryInput(content="a")], now_ms=T0)]
    call = idempotent.call_of("confirm", "c1", ids)

    async def failing() -> list:
        raise NotFound("not yet")

    async def scenario() -> None:
        with pytest.raises(NotFound):
            await idempotent.once(shard, call, failing, replay=lambda a: a, now_ms=T0)
        assert shard.calls_in_flight == {}
        with ThreadPoolExecutor(1) as pool:
            done = await delete_once(shard, ids, "c1", pool=pool)   # a Delete's "c1" is its own
            assert done == (1, [])
            with pytest.raises(InvalidArgument, match="different Delete request"):
                await delete_once(shard, ids + ["m_other"], "c1", pool=pool)

    asyncio.run(scenario())
    assert shard.store.idempotency.get("confirm", "c1", now_ms=T0) is None


def test_a_reloaded_shard_answers_from_the_log(tmp_path: Path) -> None:
    shard = make_shard(tmp_path)
    ids = [r.memory_id for r in write(shard, [MemoryInput(content="a"), MemoryInput(content="b")], now_ms=T0)]

    async def delete(s: TenantShard) -> tuple[int, list[str]]:
        with ThreadPoolExecutor(1) as pool:
            return await delete_once(s, ids, "d", pool=pool)

    assert asyncio.run(delete(shard)) == (2, [])
    shard.close()
    reloaded = make_shard(tmp_path)
    assert len(reloaded.store) == 0
    assert asyncio.run(delete(reloaded)) == (2, [])   # run again, it would answer (0, ids)
    assert deletes(reloaded) == 1


@pytest.mark.parametrize("key", ["", "k", "a" * 128, "0f8fad5b-d9cb-469f-a165-70867728950e", "01ARZ3NDEKTSV4RRFFQ69G5FAV"])
def test_keys_that_are_accepted(key: str) -> None:
    call = idempotent.call_of("write", key, [])
    assert (call is None) == (key == "")


@pytest.mark.parametrize("key", ["a" * 129, "a b", "a/b", "é", "a\x00"])
def test_keys_that_are_refused(key: str) -> None:
    with pytest.raises(InvalidArgument, match="idempotency_key"):
        idempotent.call_of("write", key, [])


class CountingPool(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(1)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_a_large_write_is_fingerprinted_off_the_loop_to_the_same_call() -> None:
    small = [MemoryInput(content="x")]
    large = [MemoryInput(content="word " * 4000) for _ in range(8)]   # 160 kB: beyond the inline limit
    with CountingPool() as pool:
        for memories, hops in ((small, 0), (large, 1)):
            assert asyncio.run(idempotent.write_call("k", memories, pool=pool)) == idempotent.call_of("write", "k", memories)
            assert pool.submitted == hops
        assert asyncio.run(idempotent.write_call("", large, pool=pool)) is None
        with pytest.raises(InvalidArgument):
            asyncio.run(idempotent.write_call("bad key", large, pool=pool))
