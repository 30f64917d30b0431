"""The context block's size rule (server/engine/context.py block_hits): the first BLOCK_HEAD hits unless nothing there
answers, the rest only at or above MIN_RELEVANCE; a query's own floor applies to every item."""

from __future__ import annotations

from pathlib import Path

from engine_support import T0, Clock, make_shard, write
from server.config import load_config
from server.domain import Breakdown, Hit, KeyScope, MemoryInput, QueryResult, SearchQuery, Timings
from server.engine import context
from server.engine.recall import Recall


def hits(shard, ids: list[str], relevance: list[float]) -> tuple[Hit, ...]:  # type: ignore[no-untyped-def]
    return tuple(Hit(memory=shard.store.get(i), breakdown=Breakdown(
        dense_rank=n + 1, dense_score=r, bm25_rank=0, bm25_score=0.0, rrf=0.0, rerank=None, relevance=r, decay=1.0,
        importance_weight=1.0, final=r)) for n, (i, r) in enumerate(zip(ids, relevance, strict=True)))


def test_the_head_holds_weak_hits_the_tail_does_not(tmp_path: Path) -> None:
    shard = make_shard(tmp_path / "t")
    ids = [r.memory_id for r in write(shard, [MemoryInput(content=f"note {i}") for i in range(6)], now_ms=T0)]
    head_weak = context.HEAD_MIN_RELEVANCE * 2           # above the head's floor, below the tail's
    assert head_weak < context.MIN_RELEVANCE
    found = hits(shard, ids, [0.6, head_weak, head_weak, head_weak, 0.05, context.HEAD_MIN_RELEVANCE / 2])
    kept = [h.memory.memory_id for h in context.block_hits(found)]
    assert kept == [ids[0], ids[1], ids[2], ids[4]]      # 4th below the tail floor, 6th below every floor
    # nothing that answers: a head below HEAD_MIN_RELEVANCE is left out too
    assert context.block_hits(hits(shard, ids[:3], [0.001, 0.001, 0.0005])) == []
    # a query's own floor is the one floor for every item
    assert [h.memory.memory_id for h in context.block_hits(found, min_relevance=0.04)] == [ids[0], ids[4]]
    assert len(context.block_hits(found, min_relevance=0.0)) == 6


def test_the_block_keeps_what_its_top_five_had_when_each_clears_the_head_floor(tmp_path: Path) -> None:
    """A block that drops a hit the top 5 had is a regression: the first three always stay (above the head floor)."""
    clock = Clock(T0)
    shard = make_shard(tmp_path / "t")
    ids = [r.memory_id for r in write(shard, [MemoryInput(content=f"Alice note number {i} about tea")
                                              for i in range(5)], now_ms=T0)]
    r = Recall(config=load_config(env={}, overrides={}), batcher=None, cache=None, gate=None,  # type: ignore[arg-type]
               tokens=len, clock=clock)
    principal = KeyScope(key_id="k", name="k", tenant_ids=frozenset({"t"}), tenant_prefixes=(), admin=False)
    found = QueryResult(hits=hits(shard, ids, [0.3, 0.005, 0.004, 0.2, 0.003]), timings=Timings())
    (out,) = r.after_search(shard, principal, [SearchQuery(text="tea?", context_block=True, context_items=5)], [found],
                            now_ms=clock())
    block = out.context_block
    assert all(f"number {i} " in block for i in (0, 1, 2, 3)) and "number 4 " not in block
    assert block.count("\n[") == 4
