"""The Search RPC on one tenant's shard, after authorization: the recall gate, the query-embedding cache, the
batched pipeline (``server/engine/search.py``), then what happens after a search — hits purged meanwhile
dropped, expiry shown, uses recorded, the audit line, the context block.

Decisions: what counts as a use is the first ``ACCESS_TOP_HITS`` hits of a live search (what enters
a prompt), not a whole top-100 list; a search "as of" a time (``scoring.now_ms`` set) records nothing: it
replays the past and must not change it. The context block holds only hits at or above the relevance floor.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence

from server.batching.batcher import Batcher
from server.batching.controller import RerankController
from server.batching.query_cache import QueryEmbeddingCache
from server.config import ServerConfig
from server.domain import AuditOp, KeyScope, QueryResult, SearchQuery
from server.engine.context import block_hits, build_context_block
from server.engine.search import SearchItem
from server.engine.validation import validate_queries
from server.hygiene.gate import RecallGate
from server.hygiene.normalise import normalise_text
from server.store.audit import refs_of
from server.tenants.shard import TenantShard
from server.tracing import Tracing, traced_now

ACCESS_TOP_HITS = 3   # a live search counts its first N hits as used (what enters a prompt); 0: only Touch does


class Recall:
    def __init__(self, *, config: ServerConfig, batcher: Batcher[SearchItem], cache: QueryEmbeddingCache,
                 gate: RecallGate, tokens: Callable[[Sequence[str]], int], clock: Callable[[], int],
                 controller: RerankController | None = None, tracing: Tracing | None = None) -> None:
        self.config = config
        self.tracing = tracing   # None: off
        self.access_top_hits = ACCESS_TOP_HITS   # a test of Touch alone sets 0 on its server
        self.batcher = batcher
        self.cache = cache
        self.gate = gate
        self.tokens = tokens
        self.clock = clock
        self.controller = controller   # told how long answers take after their batch resolved

    async def search(self, shard: TenantShard, principal: KeyScope, queries: Sequence[SearchQuery], *,
                     deadline_ns: int | None = None, arrived_ns: int = 0) -> list[QueryResult]:
        arrived_ns = arrived_ns or time.monotonic_ns()
        queries = [dataclasses.replace(q, text=normalise_text(q.text)[0]) for q in queries]
        validate_queries(queries, limits=self.config.limits)
        gated = await self.gate.skips(shard, queries)   # small talk: answered at once, nothing searched
        if gated:
            rest = [dataclasses.replace(q, gate=False) for i, q in enumerate(queries) if i not in gated]
            found = iter(await self.search(shard, principal, rest, deadline_ns=deadline_ns, arrived_ns=arrived_ns)
                         if rest else [])
            return [gated[i] if i in gated else next(found) for i in range(len(queries))]
        now = self.clock()
        tenant_id = shard.tenant_id
        jobs = []
        traced = traced_now(self.tracing)
        for q in queries:
            # A cached embedding (same tenant, same text, recent) skips the forward pass; a write cannot
            # change an embedding, and the search itself always runs on the live indexes.
            vector = None if q.lexical_only else self.cache.get(tenant_id, q.text)
            jobs.append(self.batcher.submit(
                tenant_id=tenant_id, tokens=1 if vector is not None else self.tokens([q.text]),
                deadline_ns=deadline_ns, origin_ns=arrived_ns,
                payload=SearchItem(shard=shard, query=q, now_ms=q.scoring.now_ms or now, vector=vector,
                                   traced=traced, trace=self.tracing.inject() if traced else None)))  # type: ignore[union-attr]
        shard.enter()   # a tenant purge waits for the searches holding it
        try:
            results = list(await asyncio.gather(*jobs))
        finally:
            shard.leave()
        started_ns = time.monotonic_ns()
        if traced:
            self._stage_spans(results)
        answered = self.after_search(shard, principal, queries, results, now_ms=now)
        if self.controller is not None:   # this answer's own work, which the batch's later answers wait for
            done_ns = time.monotonic_ns()
            self.controller.observe_answer(ms=(done_ns - started_ns) / 1e6 / max(1, len(results)))
            for q in queries:   # the observed tail the controller keeps under its target: default-depth queries
                if q.rerank_depth == 0:
                    self.controller.observe_latency(ms=(done_ns - arrived_ns) / 1e6)
        return answered

    def _stage_spans(self, results: Sequence[QueryResult]) -> None:
        """Each query's stage spans under the RPC's span, from its batch's marks (server/tracing.py)."""
        assert self.tracing is not None
        for i, result in enumerate(results):
            t = result.timings
            if t.marks:
                self.tracing.stages(t.marks, attributes={"engram.query.index": i, "engram.batch.size": t.batch_size},
                                    per_stage={"rerank": {"engram.rerank.depth": t.rerank_depth_used},
                                               "decay": {"engram.hits": len(result.hits)}})

    def after_search(self, shard: TenantShard, principal: KeyScope, queries: Sequence[SearchQuery],
                     results: list[QueryResult], *, now_ms: int) -> list[QueryResult]:
        """Drops hits purged while the search ran, shows expiry, records uses (not for "as of" searches),
        appends the audit lines and builds the context blocks."""
        shard.check_live()
        memory = self.config.memory
        out: list[QueryResult] = []
        for query, result in zip(queries, results, strict=True):
            hits = tuple(dataclasses.replace(h, memory=shard.view(h.memory, now_ms=now_ms))
                         for h in result.hits if shard.store.get(h.memory.memory_id) is not None)
            if not query.scoring.now_ms and self.access_top_hits:
                shard.record_uses((h.memory.memory_id for h in hits[:self.access_top_hits]), now_ms=now_ms)
            if memory.audit_searches:
                shard.log_audit(AuditOp.SEARCH, refs_of([h.memory for h in hits]), at_ms=now_ms,
                                key_id=principal.key_id, query=query.text)
            block = (build_context_block(block_hits(hits, min_relevance=query.min_relevance),
                                         max_items=query.context_items) if query.context_block else "")
            out.append(dataclasses.replace(result, hits=hits, context_block=block))
        return out
