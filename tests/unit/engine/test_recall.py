"""What follows a search (server/engine/recall.py), the shard's in-flight drain, and the facade's
authorization, on shards with no Lucene and an injected clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from async_support import run_async

from engine_support import DAY_MS, T0, Clock, make_shard, write
from server.config import ServerConfig, load_config
from server.domain import (AuditOp, Breakdown, Hit, KeyScope, MemoryInput, QueryResult, Scoring, SearchQuery,
                           Timings)
from server.engine.recall import Recall
from server.errors import NotFound, PermissionDenied


def config(**memory: object) -> ServerConfig:
    return load_config(env={}, overrides={"memory": memory} if memory else {})


def recall(cfg: ServerConfig, clock: Clock) -> Recall:
    # after_search needs only the config; the batcher, cache and gate belong to search()
    return Recall(config=cfg, batcher=None, cache=None, gate=None, tokens=len, clock=clock)  # type: ignore[arg-type]


def result(shard, ids: list[str], relevance: list[float]) -> QueryResult:  # type: ignore[no-untyped-def]
    hits = tuple(Hit(memory=shard.store.get(i), breakdown=Breakdown(
        dense_rank=n + 1, dense_score=r, bm25_rank=0, bm25_score=0.0, rrf=0.0, rerank=None, relevance=r, decay=1.0,
        importance_weight=1.0, final=r)) for n, (i, r) in enumerate(zip(ids, relevance, strict=True)))
    return QueryResult(hits=hits, timings=Timings())


def test_a_live_search_uses_its_first_hits_and_an_as_of_search_changes_nothing(tmp_path: Path) -> None:
    clock = Clock(T0 + DAY_MS)
    shard = make_shard(tmp_path / "t")
    ids = [r.memory_id for r in write(shard, [MemoryInput(content=f"note {i}") for i in range(5)], now_ms=T0)]
    r = recall(config(), clock)
    r.access_top_hits = 2   # a constant of the recall step (ACCESS_TOP_HITS = 3), set on this one
    principal = KeyScope(key_id="k1", name="k", tenant_ids=frozenset({"t"}), tenant_prefixes=(), admin=False)
    as_of = SearchQuery(text="notes", scoring=Scoring(now_ms=T0))
    r.after_search(shard, principal, [as_of], [result(shard, ids, [0.9, 0.8, 0.7, 0.6, 0.5])], now_ms=clock())
    assert len(shard.touches) == 0                                   # replaying the past records nothing
    live = SearchQuery(text="notes")
    (out,) = r.after_search(shard, principal, [live], [result(shard, ids, [0.9, 0.8, 0.7, 0.6, 0.5])], now_ms=clock())
    assert [h.memory.memory_id for h in out.hits] == ids
    shard.flush_touches(now_ms=clock())
    assert [shard.store.get(i).access_count for i in ids] == [1, 1, 0, 0, 0]   # what enters a prompt: the first two
    searches = [e for e in shard.audit.read(after=0, limit=100)[0] if e.op == AuditOp.SEARCH]
    assert [e.query for e in searches] == ["notes", "notes"] and searches[-1].key_id == "k1"
    assert [ref.memory_id for ref in searches[-1].refs] == ids


def test_hits_purged_meanwhile_are_dropped_and_the_block_keeps_to_the_relevance_floor(tmp_path: Path) -> None:
    clock = Clock(T0)
    shard = make_shard(tmp_path / "t")
    tea, allergy, gone = (r.memory_id for r in write(shard, [
        MemoryInput(content="Alice drinks green tea"), MemoryInput(content="Alice is allergic to peanuts"),
        MemoryInput(content="a memory deleted mid-search")], now_ms=T0))
    found = result(shard, [tea, allergy, gone], [0.8, 0.01, 0.7])
    with shard.write_lock:
        shard.purge_locked([gone], key_id="k", now_ms=T0, compact=False)
    principal = KeyScope(key_id="k", name="k", tenant_ids=frozenset({"t"}), tenant_prefixes=(), admin=False)
    query = SearchQuery(text="what does alice drink?", context_block=True, min_relevance=0.05)
    (out,) = recall(config(), clock).after_search(shard, principal, [query], [found], now_ms=clock())
    assert [h.memory.memory_id for h in out.hits] == [tea, allergy]
    assert "green tea" in out.context_block and "peanuts" not in out.context_block


def test_a_drop_waits_for_the_searches_holding_the_shard(tmp_path: Path) -> None:
    asyncio.run(asyncio.wait_for(_drop_waits(make_shard(tmp_path / "t")), timeout=20))


async def _drop_waits(shard) -> None:  # type: ignore[no-untyped-def]
    shard.enter()
    shard.enter()
    assert not shard.evictable()
    await asyncio.get_running_loop().run_in_executor(None, shard.mark_dropped)
    drained = asyncio.ensure_future(shard.drained())
    shard.leave()
    await asyncio.sleep(0)
    assert not drained.done()                                        # one search still holds it
    shard.leave()
    await asyncio.wait_for(drained, timeout=10)
    with pytest.raises(NotFound):
        shard.enter()                                                # nothing new reaches a dropped shard
    assert shard.state.value == "DROPPED"


class CountingRegistry:
    """A registry that counts shard loads (the facade must authorize before any)."""

    def __init__(self) -> None:
        self.loads = 0

    def loaded_shard(self, tenant_id: str) -> None:
        self.loads += 1

    def shard(self, tenant_id: str) -> None:
        self.loads += 1


@run_async
async def test_the_facade_authorizes_before_any_shard_is_touched() -> None:
    from server.engine.engine import Engine

    engine = Engine.__new__(Engine)          # only the routing half: no models, pools or batchers
    engine.config = config()
    engine.registry = CountingRegistry()     # type: ignore[assignment]
    bob = KeyScope(key_id="k", name="bob", tenant_ids=frozenset({"acme/bob"}), tenant_prefixes=(), admin=False)
    for call in (lambda: engine.search(bob, "acme/alice", [SearchQuery(text="x")]),
                 lambda: engine.write(bob, "acme/alice", [MemoryInput(content="x")]),
                 lambda: engine.get(bob, "acme/alice", ["m-1"]),
                 lambda: engine.forget(bob, "acme/alice", None)):  # type: ignore[arg-type]
        with pytest.raises(PermissionDenied):
            await call()
    with pytest.raises(PermissionDenied):
        await engine.create_tenant(bob, "acme/carol")
    assert engine.registry.loads == 0
