"""The engine: the one object every frontend (gRPC, console, CLI, benchmarks) drives — a thin facade that
authorizes the principal for the tenant before any other work, finds the tenant's shard, and routes the
call to the part whose job it is:

- :mod:`server.engine.ingest` — Write (and the write batcher's embedding stage);
- :mod:`server.engine.recall` — Search (the pipeline in :mod:`server.engine.search` and what follows it);
- :mod:`server.engine.memories` — get, list, history, confirm, touch, forget, delete, audit pages;
- :mod:`server.engine.admin` — tenants, keys, settings, info, stats.

Blocking work (models, FAISS, Lucene, disk) runs on executor threads; the event loop only schedules.
Every per-tenant state lives in the shard (``server/tenants/shard.py``); the engine keeps none.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, TypeVar

from kernels.decay import DecayRanker
from models.base import Embedder, Reranker
from models.threads import process_cpus
from server.batching.batcher import MAX_BATCH_TOKENS, MAX_WAIT_MS, Batcher, device_slots, max_in_flight
from server.batching.controller import RerankController
from server.batching.pair_cache import PAIR_CACHE_ENTRIES, PairScoreCache
from server.batching.query_cache import QUERY_CACHE_ENTRIES, QueryEmbeddingCache
from server.batching.scheduler import TENANT_QUANTUM
from server.config import BUNDLED, BUNDLED_QUERY_ADAPTER, ServerConfig
from server.domain import (AuditEntry, AuditOp, ConsolidationReport, Extraction, Filter, ForgetSpec, KeyScope,
                           Memory, MemoryInput, QueryResult, SearchQuery, WriteResult)
from server.engine import idempotent
from server.engine.admin import Admin
from server.engine.ingest import SEARCH_HOLD_MS, EmbedStage, Ingest, WriteTexts
from server.engine.memories import Memories, Page
from server.engine.query_adapter import QueryAdapter, load_query_adapter
from server.engine.query_tower import QueryTower, load_query_tower
from server.engine.recall import Recall
from server.engine.search import SearchItem, SearchPipeline, auto_rerank_depth
from server.engine.updates import LINK_COSINE_DEFAULT
from server.engine.validation import validate_memory_ids
from server.errors import InvalidArgument, PermissionDenied
from server.fusion.calibration import BUNDLED_CALIBRATION, Calibration, load_calibration
from server.hygiene.consolidator import Consolidator
from server.hygiene.extractor import EXTRACTOR_KEY_ID, Extractor
from server.hygiene.gate import RecallGate
from server.hygiene.salience import load_salience
from server.hygiene.writes import SaliencePolicy
from server.store.space import DiskSpace
from server.tenants.catalog import validate_tenant_id
from server.tenants.registry import TenantRegistry
from server.tenants.settings import TenantSettings
from server.tenants.shard import TenantShard
from server.tracing import Tracing, traced_now

log = logging.getLogger(__name__)

__all__ = ["Engine", "Page", "load_calibration_for", "now_ms"]

R = TypeVar("R")


def load_calibration_for(config: ServerConfig, embedder: Embedder, reranker: Reranker | None) -> Calibration:
    """The relevance calibration fitted for these models (``scoring.calibration`` or the bundled file)."""
    path = Path(config.scoring.calibration) if config.scoring.calibration else BUNDLED_CALIBRATION
    return load_calibration(path, embedder=embedder.name, reranker=reranker.name if reranker is not None else "")


def load_query_adapter_for(config: ServerConfig, embedder: Embedder) -> QueryAdapter | QueryTower | None:
    """The query side of ``advanced.query_adapter`` where it was trained for this embedder, else None: a folder with a
    query tower's weights (server/engine/query_tower.py) loads the tower, else its linear map."""
    folder = BUNDLED_QUERY_ADAPTER if config.models.query_adapter == BUNDLED else config.models.query_adapter
    if not folder:
        return None
    tower = load_query_tower(folder, embedder=embedder)
    if tower is not None:
        log.info("query tower %s (sha256 %s, layers from %d) for %s", folder, tower.sha256[:12], tower.start,
                 embedder.name)
        return tower
    adapter = load_query_adapter(folder, embedder=embedder.name, dim=embedder.dim)
    if adapter is not None:
        log.info("query adapter %s (sha256 %s) for %s", folder, adapter.sha256[:12], embedder.name)
    return adapter


def now_ms() -> int:
    return int(time.time() * 1000)


def idle_threads(requested: int, device: str, device_pool: Executor) -> int:
    """Torch threads of a cross-encoder pass that runs alone (the controller's ``idle_threads``): the
    configured count, or every core of the process (0 = auto), on CPU only; 0 when that is no more than the
    threads every pass already has (read on the device thread: torch's OpenMP setting is per thread)."""
    if not device.startswith("cpu"):
        return 0
    import torch

    wide = requested or process_cpus()
    return wide if wide > device_pool.submit(torch.get_num_threads).result() else 0


def write_stage(*, embedder: Embedder, device: str, device_pool: Executor, cpu_pool: Executor, lanes: int,
                search: Batcher[Any], passages: int = 0, turn_tokens: int = 0, turn_passages: int = 0) -> EmbedStage:
    """The write batcher's stage. On a CPU: chunks of CHUNK_TOKENS on every device thread, each with its share of
    the process's cores while no search was active in the last SEARCH_HOLD_MS; on a GPU one chunk a batch."""
    windows = dict(passages=passages, turn_tokens=turn_tokens, turn_passages=turn_passages)
    if not device.startswith("cpu"):
        return EmbedStage(embedder=embedder, device_pool=device_pool, tokenize_pool=cpu_pool,
                          chunk_tokens=MAX_BATCH_TOKENS * 4, **windows)
    import torch

    share = process_cpus() // max(1, lanes)
    wide = share if share > device_pool.submit(torch.get_num_threads).result() else 0
    hold_ns = int(SEARCH_HOLD_MS * 1e6)
    return EmbedStage(embedder=embedder, device_pool=device_pool, tokenize_pool=cpu_pool, lanes=lanes,
                      idle_threads=wide, search_waiting=lambda: search.active_within(hold_ns), **windows)


class Engine:
    def __init__(self, *, config: ServerConfig, registry: TenantRegistry, embedder: Embedder,
                 reranker: Reranker | None, ranker: DecayRanker, device: str, device_pool: Executor,
                 cpu_pool: Executor, write_pool: Executor, space: DiskSpace | None = None,
                 clock: Callable[[], int] = now_ms, device_threads: int = 1, tracing: Tracing | None = None) -> None:
        """``device_threads``: the threads of ``device_pool``, each able to run a forward pass (server/app.py);
        ``tracing``: the spans (server/tracing.py; None: off), closed with the engine."""
        if not config.memory.dedupe_cosine:   # 0 = the embedder's own near-duplicate threshold
            threshold = float(getattr(embedder, "near_duplicate_cosine", 0.95))
            config = dataclasses.replace(config, memory=dataclasses.replace(config.memory, dedupe_cosine=threshold))
        if not config.memory.update_link_cosine:   # 0 = the embedder's own update-link threshold (engine/updates.py)
            link = float(getattr(embedder, "update_link_cosine", LINK_COSINE_DEFAULT))
            config = dataclasses.replace(config, memory=dataclasses.replace(config.memory, update_link_cosine=link))
        self.config = config
        self.tracing = tracing
        self.space = space   # the free-space watermark: writes are turned away below it
        self.registry = registry
        self.embedder = embedder
        self.reranker = reranker
        self.device = device
        self.device_pool = device_pool
        self.cpu_pool = cpu_pool
        self.write_pool = write_pool
        self.clock = clock
        b = config.batching
        max_requests = b.max_batch_requests   # 1: no batching (each query alone, two on the device at once)
        rerank_device = str(reranker.describe().get("device", device)) if reranker is not None else device
        self.controller = RerankController(
            target_ms=config.search.latency_target_ms, device=rerank_device,
            full_depth=config.search.rerank_depth or auto_rerank_depth(reranker), max_requests=max_requests,
            idle_threads=idle_threads(config.models.idle_threads, rerank_device, device_pool),
        ) if reranker is not None else None
        self.pair_cache = PairScoreCache(max_entries=PAIR_CACHE_ENTRIES)
        self.query_cache = QueryEmbeddingCache(ttl_ms=b.query_cache_ttl_ms, max_entries=QUERY_CACHE_ENTRIES)
        self.search_pipeline = SearchPipeline(embedder=embedder, reranker=reranker, ranker=ranker,
                                              device_pool=device_pool, cpu_pool=cpu_pool,
                                              search=config.search, scoring=config.scoring,
                                              calibration=load_calibration_for(config, embedder, reranker),
                                              cache=self.query_cache, controller=self.controller,
                                              pair_cache=self.pair_cache,
                                              thread_window_s=config.memory.thread_window_s,
                                              turn_tokens=config.models.turn_passage_tokens,
                                              turn_passages=config.models.turn_passage_vectors
                                              if config.models.passage_vectors else 0,
                                              query_adapter=load_query_adapter_for(config, embedder))
        self.search_pipeline.measure_rerank_cost()
        queue = dict(max_requests=max_requests, max_wait_ms=MAX_WAIT_MS if max_requests > 1 else 0.0,
                     capacity=b.queue_capacity, device_slots=device_slots(max_requests, device_threads),
                     max_in_flight=max_in_flight(max_requests, device_threads),
                     tenant_weights=b.weights(), tenant_quantum=TENANT_QUANTUM)
        self.search_batcher: Batcher[SearchItem] = Batcher(
            name="search", stage=self.search_pipeline, max_tokens=MAX_BATCH_TOKENS, split_above=b.split_above,
            **queue)  # type: ignore[arg-type]
        self.write_stage = write_stage(embedder=embedder, device=device, device_pool=device_pool, cpu_pool=cpu_pool,
                                       lanes=device_threads, search=self.search_batcher,
                                       passages=config.models.passage_vectors,
                                       turn_tokens=config.models.turn_passage_tokens,
                                       turn_passages=config.models.turn_passage_vectors)
        self.write_batcher: Batcher[list[str] | WriteTexts] = Batcher(
            name="write-embed", stage=self.write_stage, max_tokens=MAX_BATCH_TOKENS * 4, **queue)  # type: ignore[arg-type]
        self.memories = Memories(config=config)
        self.admin = Admin(config=config, registry=registry, write_pool=write_pool, space=space,
                           batchers=[self.search_batcher, self.write_batcher], query_cache=self.query_cache,
                           pair_cache=self.pair_cache, controller=self.controller, describe=self._describe,
                           clock=clock)
        self.extractor = Extractor(cfg=config.memory, write=self._write_facts, embed=self._embed_turns,
                                   max_context_bytes=config.limits.max_content_bytes, write_pool=write_pool,
                                   link=self._review_link, shard_of=registry.shard)
        self.ingest = Ingest(config=config, batcher=self.write_batcher, memories=self.memories,
                             salience=SaliencePolicy(cfg=config.memory, model=load_salience()),
                             min_salience=lambda t: registry.catalog.settings(t).min_salience,
                             write_pool=write_pool, tokens=self._tokens, check_space=self.admin.check_space,
                             clock=clock, extractor=self.extractor, tracing=tracing)
        self.recall_gate = RecallGate(pool=cpu_pool)
        self.recall = Recall(config=config, batcher=self.search_batcher, cache=self.query_cache,
                             gate=self.recall_gate, tokens=self._tokens, clock=clock, controller=self.controller,
                             tracing=tracing)
        self.consolidator = Consolidator(cfg=config.memory, registry=registry, embed=self._embed_texts,
                                         cpu_pool=cpu_pool, write_pool=write_pool)
        registry.sweep_orphans()

    async def start(self) -> None:
        self.search_batcher.start()
        self.write_batcher.start()
        self.consolidator.start()

    async def close(self) -> None:
        await self.consolidator.close()
        await self.extractor.close()
        await self.search_batcher.close()
        await self.write_batcher.close()
        await self._run(self.write_pool, self.registry.flush)
        if self.tracing is not None:
            await self._run(self.write_pool, self.tracing.close)   # exports the spans still buffered

    # -- routing ----------------------------------------------------------------------------------------
    def authorize(self, principal: KeyScope, tenant_id: str) -> None:
        validate_tenant_id(tenant_id)
        if not principal.covers(tenant_id):
            raise PermissionDenied(f"this key does not cover tenant {tenant_id!r}")

    def require_admin(self, principal: KeyScope) -> None:
        if not principal.admin:
            raise PermissionDenied("this call needs an admin key")

    async def _shard(self, principal: KeyScope, tenant_id: str) -> TenantShard:
        self.authorize(principal, tenant_id)
        shard = self.registry.loaded_shard(tenant_id)  # the common case: no thread hop
        if shard is not None:
            return shard
        if not traced_now(self.tracing):
            return await self._run(self.cpu_pool, self.registry.shard, tenant_id)
        assert self.tracing is not None
        with self.tracing.span("engram.load"):   # the tenant's shard loads (or a load in progress is awaited)
            return await self._run(self.cpu_pool, self.registry.shard, tenant_id)

    @staticmethod
    async def _run(pool: Executor, fn: Callable[..., R], *args: Any) -> R:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def _tokens(self, texts: Sequence[str]) -> int:
        return sum(min(self.config.models.embed_max_length, len(t) // 3 + 2) for t in texts)

    async def _embed_texts(self, tenant_id: str, texts: list[str]) -> Any:
        return await self.ingest.embed(tenant_id, texts)

    async def _embed_turns(self, tenant_id: str, texts: list[str]) -> Any:
        """Chat turns' texts (the extractor re-embeds a turn whose key text changed) with their windows, as a
        Write embeds them."""
        return await self.ingest.embed(tenant_id, texts, turns=True)

    def _describe(self) -> dict[str, Any]:
        return {"device": self.device, "embedder": self.embedder.describe(),
                "reranker": self.reranker.describe() if self.reranker is not None else None}

    def check_space(self) -> None:
        self.admin.check_space()

    # -- writes and searches ---------------------------------------------------------------------------
    async def write(self, principal: KeyScope, tenant_id: str, memories: Sequence[MemoryInput], *,
                    deadline_ns: int | None = None, idempotency_key: str = "") -> list[WriteResult]:
        """``idempotency_key`` (here and on confirm, forget, delete): a retry with the same key and request
        is answered from the first call's record, applied once (server/engine/idempotent.py)."""
        shard = await self._shard(principal, tenant_id)
        if shard.repair_due():   # space returned after a full disk: the lexical rebuild takes it before new Writes
            await asyncio.get_running_loop().run_in_executor(self.write_pool, self.registry.repair_if_due, shard)
        call = await idempotent.write_call(idempotency_key, memories, pool=self.cpu_pool)
        return await idempotent.once(shard, call, lambda: self.ingest.write(
            shard, memories, key_id=principal.key_id, deadline_ns=deadline_ns, call=call),
            replay=idempotent.write_results, now_ms=self.clock())

    async def _write_facts(self, tenant_id: str, memories: list[MemoryInput]) -> list[WriteResult]:
        extractor = KeyScope(key_id=EXTRACTOR_KEY_ID, name="extractor", tenant_ids=frozenset({tenant_id}),
                             tenant_prefixes=(), admin=False)
        return await self.write(extractor, tenant_id, memories)

    def _review_link(self, shard: TenantShard, memory_id: str, updates_id: str, unlink: bool) -> None:
        """The extractor's review of an update link, applied as LinkUpdate applies one (write pool; audited with the
        note "extractor")."""
        self.memories.link_update(shard, memory_id, updates_id, unlink=unlink, key_id=EXTRACTOR_KEY_ID,
                                  now_ms=self.clock(), note="extractor")

    async def extract(self, principal: KeyScope, tenant_id: str, *, conversation: str, turns: int = 0) -> Extraction:
        """Runs the configured extractor on a conversation's recent turns now (README "Memory hygiene")."""
        shard = await self._shard(principal, tenant_id)
        if not 0 <= turns <= 200:
            raise InvalidArgument("turns must be in [0, 200]")
        return await self.extractor.extract(shard, conversation=conversation, turns=turns)

    async def search(self, principal: KeyScope, tenant_id: str, queries: Sequence[SearchQuery], *,
                     deadline_ns: int | None = None) -> list[QueryResult]:
        arrived_ns = time.monotonic_ns()   # the latency target counts from here (a shard load included)
        shard = await self._shard(principal, tenant_id)
        return await self.recall.search(shard, principal, queries, deadline_ns=deadline_ns, arrived_ns=arrived_ns)

    async def consolidate(self, principal: KeyScope, tenant_id: str, *, dry_run: bool = False) -> ConsolidationReport:
        """Runs the consolidation job for one tenant now (README "Memory hygiene")."""
        shard = await self._shard(principal, tenant_id)
        return await self.consolidator.run(shard, dry_run=dry_run, key_id=principal.key_id)

    # -- the other memory RPCs ---------------------------------------------------------------------------
    async def get(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str]) -> tuple[list[Memory], list[str]]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        return self.memories.get(shard, memory_ids, now_ms=self.clock())

    async def list_memories(self, principal: KeyScope, tenant_id: str, *, flt: Filter, page_size: int,
                            page_token: str) -> Page:
        shard = await self._shard(principal, tenant_id)
        return self.memories.list(shard, flt=flt, page_size=page_size, page_token=page_token, now_ms=self.clock())

    async def history(self, principal: KeyScope, tenant_id: str, memory_id: str) -> tuple[list[Memory], str]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids([memory_id], limit=1)
        return self.memories.history(shard, memory_id, now_ms=self.clock())

    async def confirm(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str], *,
                      idempotency_key: str = "") -> list[tuple[Memory, tuple[str, ...]]]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        call = idempotent.call_of("confirm", idempotency_key, list(memory_ids))

        async def run() -> list[tuple[Memory, tuple[str, ...]]]:
            self.check_space()   # a retry answered from its record needs no space
            return await self._run(self.write_pool, lambda: self.memories.confirm(
                shard, memory_ids, key_id=principal.key_id, now_ms=self.clock(), call=call))

        return await idempotent.once(shard, call, run, replay=lambda answer: idempotent.confirm_results(shard, answer),
                                     now_ms=self.clock())

    async def link_update(self, principal: KeyScope, tenant_id: str, memory_id: str, updates_id: str, *,
                          unlink: bool) -> tuple[Memory, Memory]:
        """Makes or removes the update link ``memory_id`` → ``updates_id`` (docs/concepts/updates.md)."""
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids([memory_id, updates_id], limit=2)
        self.check_space()
        return await self._run(self.write_pool, lambda: self.memories.link_update(
            shard, memory_id, updates_id, unlink=unlink, key_id=principal.key_id, now_ms=self.clock()))

    async def touch(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str]) -> tuple[int, list[str]]:
        """Records that the client used these memories: one access each (what recency reads)."""
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        # The audit line is a file append: off the event loop.
        return await self._run(self.cpu_pool, lambda: self.memories.touch(
            shard, memory_ids, key_id=principal.key_id, now_ms=self.clock()))

    async def forget(self, principal: KeyScope, tenant_id: str, spec: ForgetSpec, *,
                     idempotency_key: str = "") -> tuple[int, list[str]]:
        shard = await self._shard(principal, tenant_id)
        call = idempotent.call_of("forget", idempotency_key, spec)
        return await idempotent.once(shard, call, lambda: self._run(self.write_pool, lambda: self.memories.forget(
            shard, spec, key_id=principal.key_id, now_ms=self.clock(), call=call)),
            replay=idempotent.count_result, now_ms=self.clock())

    async def delete(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str], *,
                     idempotency_key: str = "") -> tuple[int, list[str]]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        call = idempotent.call_of("delete", idempotency_key, list(memory_ids))

        async def run() -> tuple[int, list[str]]:
            undo = any((m := shard.store.get(i)) is not None and m.consolidates for i in memory_ids)
            deleted = await self._run(self.write_pool, lambda: self.memories.delete(
                shard, memory_ids, key_id=principal.key_id, now_ms=self.clock(), call=call))
            if undo:   # deleting a consolidation's semantic memory undoes it: its episodic members are ACTIVE again
                await self._run(self.write_pool, self.consolidator.restore, shard, principal.key_id)
            return deleted

        return await idempotent.once(shard, call, run, replay=idempotent.count_result, now_ms=self.clock())

    async def audit(self, principal: KeyScope, tenant_id: str, *, page_size: int, page_token: str,
                    ops: frozenset[AuditOp], memory_id: str) -> tuple[list[AuditEntry], str]:
        shard = await self._shard(principal, tenant_id)
        if memory_id:
            validate_memory_ids([memory_id], limit=1)
        return await self._run(self.cpu_pool, lambda: self.memories.audit_page(
            shard, page_size=page_size, page_token=page_token, ops=ops, memory_id=memory_id))

    # -- tenants, settings, keys, state -------------------------------------------------------------------
    async def create_tenant(self, principal: KeyScope, tenant_id: str,
                            initial: Sequence[MemoryInput] = (), template_tenant_id: str = "") -> int:
        self.require_admin(principal)
        validate_tenant_id(tenant_id)
        template = await self._shard(principal, template_tenant_id) if template_tenant_id else None
        return await self.admin.create_tenant(principal, tenant_id, initial, template, self.write)

    async def delete_tenant(self, principal: KeyScope, tenant_id: str) -> int:
        self.require_admin(principal)
        validate_tenant_id(tenant_id)
        return await self.admin.delete_tenant(tenant_id)

    def list_tenants(self, principal: KeyScope) -> list[str]:
        return self.admin.list_tenants(principal)

    async def settings(self, principal: KeyScope, tenant_id: str) -> tuple[TenantSettings, TenantSettings]:
        """The tenant's own settings and the ones in effect (unset: the server's config)."""
        self.authorize(principal, tenant_id)
        return self.admin.settings(tenant_id)

    async def update_settings(self, principal: KeyScope, tenant_id: str, *, values: dict[str, float],
                              reset: Sequence[str]) -> tuple[TenantSettings, TenantSettings]:
        self.authorize(principal, tenant_id)
        return await self.admin.update_settings(principal, tenant_id, values=values, reset=reset)

    def create_key(self, principal: KeyScope, *, name: str, tenant_ids: list[str], prefixes: list[str],
                   admin: bool) -> tuple[str, str]:
        self.require_admin(principal)
        return self.admin.create_key(name=name, tenant_ids=tenant_ids, prefixes=prefixes, admin=admin)

    def revoke_key(self, principal: KeyScope, key_id: str) -> None:
        self.require_admin(principal)
        self.admin.revoke_key(key_id)

    def rotate_key(self, principal: KeyScope, key_id: str) -> str:
        self.require_admin(principal)
        return self.admin.rotate_key(key_id)

    def info(self) -> dict[str, Any]:
        return self.admin.info()

    def stats(self, principal: KeyScope, tenant_id: str = "") -> dict[str, Any]:
        """The tenant registry's state (admin only): loaded tenants, index tiers, memory budget."""
        self.require_admin(principal)
        if tenant_id:
            validate_tenant_id(tenant_id)
        return self.admin.stats(tenant_id)

    def storage_stats(self, *, top_n: int = 10) -> dict[str, Any]:
        return self.admin.storage_stats(top_n=top_n)

    def flush(self) -> None:
        """The periodic flush (a worker thread): every loaded shard's touches, audit and Lucene, then the
        background maintenance that is due (compactions, lexical repairs)."""
        self.registry.flush()
        self.registry.maintain()
