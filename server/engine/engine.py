"""The engine: the one object every frontend (gRPC, CLI, benchmarks) drives.

Every tenant-scoped method authorizes the principal for the tenant before any other work. Blocking
work (models, FAISS, Lucene, disk) runs on executor threads; the event loop only schedules.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernels.decay import DecayRanker
from models.base import Embedder, Reranker
from server.batching.batcher import Batcher, Entry, device_slots
from server.batching.controller import RerankController
from server.batching.pair_cache import PairScoreCache
from server.batching.query_cache import QueryEmbeddingCache
from server.config import ServerConfig
from server.domain import (AuditEntry, AuditOp, ConsolidationReport, Extraction, Filter, ForgetSpec, KeyScope, Memory, MemoryInput,
                           MemoryStatus, MemoryType, QueryResult, SearchQuery, WriteResult, is_expired)
from server.engine.conversation import thread_contexts
from server.engine.lifecycle import Lifecycle
from server.engine.search import SearchItem, SearchPipeline, auto_rerank_depth
from server.engine.validation import validate_memories, validate_memory_ids, validate_queries
from server.engine.write import commit_writes
from server.errors import InvalidArgument, NotFound, PermissionDenied
from server.fusion.calibration import BUNDLED_CALIBRATION, Calibration, load_calibration
from server.hygiene.consolidator import Consolidator
from server.hygiene.extractor import Extractor
from server.hygiene.gate import RecallGate
from server.hygiene.normalise import normalise_input, normalise_text
from server.hygiene.salience import load_salience
from server.hygiene.writes import SaliencePolicy
from server.store.space import DiskSpace
from server.tenants.catalog import validate_tenant_id
from server.text import indexed_text
from server.tenants.registry import TenantRegistry
from server.tenants.shard import TenantShard

log = logging.getLogger(__name__)


def load_calibration_for(config: ServerConfig, embedder: Embedder, reranker: Reranker | None) -> Calibration:
    """The relevance calibration fitted for these models (``scoring.calibration`` or the bundled file)."""
    path = Path(config.scoring.calibration) if config.scoring.calibration else BUNDLED_CALIBRATION
    return load_calibration(path, embedder=embedder.name, reranker=reranker.name if reranker is not None else "")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Page:
    memories: list[Memory]
    next_token: str


class Engine:
    def __init__(self, *, config: ServerConfig, registry: TenantRegistry, embedder: Embedder,
                 reranker: Reranker | None, ranker: DecayRanker, device: str, device_pool: Executor,
                 cpu_pool: Executor, write_pool: Executor, space: DiskSpace | None = None) -> None:
        self.config = config
        self.space = space   # the free-space watermark: writes are turned away below it
        self.registry = registry
        self.embedder = embedder
        self.reranker = reranker
        self.device = device
        self.device_pool = device_pool
        self.cpu_pool = cpu_pool
        self.write_pool = write_pool
        if not config.memory.dedupe_cosine:   # 0 = the embedder's own near-duplicate threshold
            threshold = float(getattr(embedder, "near_duplicate_cosine", 0.95))
            config = dataclasses.replace(config, memory=dataclasses.replace(config.memory, dedupe_cosine=threshold))
            self.config = config
        self.lifecycle = Lifecycle(config=config, registry=registry)
        self.salience = SaliencePolicy(cfg=config.memory, model=load_salience())
        self.recall_gate = RecallGate(pool=cpu_pool)
        self.consolidator = Consolidator(cfg=config.memory, lifecycle=self.lifecycle, registry=registry,
                                         embed=self._embed_texts, cpu_pool=cpu_pool, write_pool=write_pool)
        self.extractor = Extractor(cfg=config.memory, write=self._write_facts, embed=self._embed_texts,
                                   max_context_bytes=config.limits.max_content_bytes, write_pool=write_pool)
        b = config.batching
        max_requests = b.max_batch_requests if b.enabled else 1
        self.controller = RerankController(
            target_ms=config.search.latency_target_ms, device=str(reranker.describe().get("device", device)),
            full_depth=config.search.rerank_depth or auto_rerank_depth(reranker), max_requests=max_requests,
        ) if reranker is not None else None
        self.pair_cache = PairScoreCache(max_entries=config.search.pair_cache_entries)
        self.query_cache = QueryEmbeddingCache(ttl_ms=b.query_cache_ttl_ms, max_entries=b.query_cache_entries)
        self.search_pipeline = SearchPipeline(embedder=embedder, reranker=reranker, ranker=ranker,
                                              device_pool=device_pool, cpu_pool=cpu_pool,
                                              search=config.search, scoring=config.scoring,
                                              calibration=load_calibration_for(config, embedder, reranker),
                                              access_step=config.memory.access_importance_step,
                                              access_cap=config.memory.access_importance_max,
                                              cache=self.query_cache, controller=self.controller,
                                              pair_cache=self.pair_cache)
        wait = b.max_wait_ms if b.enabled else 0.0
        slots = b.device_slots or device_slots(max_requests)
        self.search_batcher: Batcher[SearchItem] = Batcher(
            name="search", run_batch=self.search_pipeline.run_batch, max_tokens=b.max_batch_tokens,
            max_requests=max_requests, max_wait_ms=wait, capacity=b.queue_capacity,
            device_slots=slots, shape=self.search_pipeline.shape, tenant_weights=b.weights(),
            tenant_quantum=b.tenant_quantum)
        self.write_batcher: Batcher[list[str]] = Batcher(
            name="write-embed", run_batch=self._embed_batch, max_tokens=b.max_batch_tokens * 4,
            max_requests=max_requests, max_wait_ms=wait, capacity=b.queue_capacity,
            device_slots=slots, tenant_weights=b.weights(), tenant_quantum=b.tenant_quantum)

    async def start(self) -> None:
        self.search_batcher.start()
        self.write_batcher.start()
        self.consolidator.start()

    async def close(self) -> None:
        await self.consolidator.close()
        await self.extractor.close()
        await self.search_batcher.close()
        await self.write_batcher.close()
        await asyncio.get_running_loop().run_in_executor(self.write_pool, self.lifecycle.flush)

    # -- helpers --------------------------------------------------------------------------------------
    def authorize(self, principal: KeyScope, tenant_id: str) -> None:
        validate_tenant_id(tenant_id, max_len=self.config.limits.max_tenant_id_len)
        if not principal.covers(tenant_id):
            raise PermissionDenied(f"this key does not cover tenant {tenant_id!r}")

    async def _shard(self, principal: KeyScope, tenant_id: str) -> TenantShard:
        self.authorize(principal, tenant_id)
        shard = self.registry.loaded_shard(tenant_id)  # the common case: no thread hop
        if shard is not None:
            return shard
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.cpu_pool, self.registry.shard, tenant_id)

    def _tokens(self, texts: Sequence[str]) -> int:
        return sum(min(self.config.models.embed_max_length, len(t) // 3 + 2) for t in texts)

    async def _embed_texts(self, tenant_id: str, texts: list[str]) -> np.ndarray:
        return await self.write_batcher.submit(tenant_id=tenant_id, tokens=self._tokens(texts), payload=texts,
                                               deadline_ns=None)

    async def _embed_batch(self, batch: list[Entry[list[str]]], device_done: Callable[[], None]) -> None:
        """All of it is the device stage: the batch leaves its device slot when it returns."""
        prefix = getattr(self.embedder, "passage_prefix", "")   # asymmetric models (e5): "passage: "
        texts = [prefix + t for entry in batch for t in entry.payload]
        vectors = await asyncio.get_running_loop().run_in_executor(self.device_pool, self.embedder.embed, texts)
        start = 0
        for entry in batch:
            entry.resolve(vectors[start:start + len(entry.payload)])
            start += len(entry.payload)

    def check_space(self) -> None:
        """Admission for writes that add data: below the free-space watermark, StorageFull (RESOURCE_EXHAUSTED)
        before any work. Delete and Forget pass (they free space; ENOSPC still answers them "storage full")."""
        if self.space is not None:
            self.space.check_writable()

    # -- memory RPCs ------------------------------------------------------------------------------------
    async def write(self, principal: KeyScope, tenant_id: str, memories: Sequence[MemoryInput], *,
                    deadline_ns: int | None = None) -> list[WriteResult]:
        shard = await self._shard(principal, tenant_id)
        memories = [normalise_input(m, where=f"memories[{i}]") for i, m in enumerate(memories)]
        validate_memories(memories, limits=self.config.limits)
        prepared = self.salience.prepare(memories)   # salience; below memory.min_salience: skipped
        if len(prepared.inputs) < len(memories):
            stored = await self.write(principal, tenant_id, prepared.inputs, deadline_ns=deadline_ns) \
                if prepared.inputs else []
            return self.salience.assemble(prepared, stored)
        memories = prepared.inputs
        self.check_space()
        now = now_ms()
        # A chat turn written alone is indexed with the turn before it (server/engine/conversation.py).
        memories = thread_contexts(shard.store, memories, window_ms=int(self.config.memory.thread_window_s * 1000),
                                   now_ms=now)
        texts = [indexed_text(m.content, dated=m.type == MemoryType.EPISODIC, created_at_ms=m.created_at_ms or now,
                              entities=m.entities, context=m.context) for m in memories]
        vectors: np.ndarray = await self.write_batcher.submit(
            tenant_id=tenant_id, tokens=self._tokens(texts), payload=texts, deadline_ns=deadline_ns)
        results = await asyncio.get_running_loop().run_in_executor(self.write_pool, self._commit, shard, memories,
                                                                   vectors, principal.key_id)
        self.extractor.note_write(shard, memories, results)   # counts turns; an extraction runs in the background
        return self.salience.assemble(prepared, results)

    async def _write_facts(self, tenant_id: str, memories: list[MemoryInput]) -> list[WriteResult]:
        extractor = KeyScope(key_id="engram-extractor", name="extractor", tenant_ids=frozenset({tenant_id}),
                             tenant_prefixes=(), admin=False)
        return await self.write(extractor, tenant_id, memories)

    async def extract(self, principal: KeyScope, tenant_id: str, *, conversation: str, turns: int = 0) -> Extraction:
        """Runs the configured extractor on a conversation's recent turns now (README "Memory hygiene")."""
        shard = await self._shard(principal, tenant_id)
        if not 0 <= turns <= 200:
            raise InvalidArgument("turns must be in [0, 200]")
        return await self.extractor.extract(shard, conversation=conversation, turns=turns)

    def _commit(self, shard: TenantShard, memories: Sequence[MemoryInput], vectors: np.ndarray,
                key_id: str = "") -> list[WriteResult]:
        with shard.write_lock:
            self.lifecycle.check_live(shard)
            now = now_ms()
            results = commit_writes(shard, memories, vectors, cfg=self.config.memory, now_ms=now)
            self.lifecycle.after_write_locked(shard, memories, results, key_id=key_id, now_ms=now)
            return results

    async def search(self, principal: KeyScope, tenant_id: str, queries: Sequence[SearchQuery], *,
                     deadline_ns: int | None = None) -> list[QueryResult]:
        shard = await self._shard(principal, tenant_id)
        queries = [dataclasses.replace(q, text=normalise_text(q.text)[0]) for q in queries]
        validate_queries(queries, limits=self.config.limits)
        gated = await self.recall_gate.skips(shard, queries)   # small talk: answered at once, nothing searched
        if gated:
            rest = [dataclasses.replace(q, gate=False) for i, q in enumerate(queries) if i not in gated]
            found = iter(await self.search(principal, tenant_id, rest, deadline_ns=deadline_ns) if rest else [])
            return [gated[i] if i in gated else next(found) for i in range(len(queries))]
        now = now_ms()
        jobs = []
        for q in queries:
            # A cached embedding (same tenant, same text, recent) skips the forward pass; a write cannot
            # change an embedding, and the search itself always runs on the live indexes.
            vector = None if q.lexical_only else self.query_cache.get(tenant_id, q.text)
            jobs.append(self.search_batcher.submit(
                tenant_id=tenant_id, tokens=1 if vector is not None else self._tokens([q.text]),
                deadline_ns=deadline_ns,
                payload=SearchItem(shard=shard, query=q, now_ms=q.scoring.now_ms or now, vector=vector)))
        state = self.lifecycle.enter_search(shard)   # a tenant purge waits for the searches holding it
        try:
            results = list(await asyncio.gather(*jobs))
        finally:
            self.lifecycle.exit_search(state)
        return self.lifecycle.after_search(shard, principal, queries, results, now_ms=now)

    async def get(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str]) -> tuple[list[Memory], list[str]]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        found, missing = [], []
        now = now_ms()
        for memory_id in memory_ids:
            memory = shard.store.get(memory_id)
            (found if memory is not None else missing).append(memory or memory_id)
        self.lifecycle.check_live(shard)
        return [self.lifecycle.view(shard, m, now_ms=now) for m in found], missing  # type: ignore[arg-type]

    async def delete(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str]) -> tuple[int, list[str]]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        loop = asyncio.get_running_loop()
        undo = any((m := shard.store.get(i)) is not None and m.consolidates for i in memory_ids)
        deleted = await loop.run_in_executor(
            self.write_pool, lambda: self.lifecycle.delete(shard, memory_ids, key_id=principal.key_id, now_ms=now_ms()))
        if undo:   # deleting a consolidation's semantic memory undoes it: its episodic members are ACTIVE again
            await loop.run_in_executor(self.write_pool, self.consolidator.restore, shard, principal.key_id)
        return deleted

    async def consolidate(self, principal: KeyScope, tenant_id: str, *, dry_run: bool = False) -> ConsolidationReport:
        """Runs the consolidation job for one tenant now (README "Memory hygiene")."""
        shard = await self._shard(principal, tenant_id)
        return await self.consolidator.run(shard, dry_run=dry_run, key_id=principal.key_id)

    async def list_memories(self, principal: KeyScope, tenant_id: str, *, flt: Filter, page_size: int,
                            page_token: str) -> Page:
        shard = await self._shard(principal, tenant_id)
        limits = self.config.limits
        if not 0 <= page_size <= limits.max_page_size:
            raise InvalidArgument(f"page_size must be in [0, {limits.max_page_size}]")
        size = page_size or 100
        after = _decode_token(page_token)
        statuses = flt.statuses
        now = now_ms()
        memories = sorted((m for m in shard.store.all()
                           if m.doc_id > after and flt.matches(m, statuses=statuses, now_ms=now)),
                          key=lambda m: m.doc_id)
        page = memories[:size]
        token = _encode_token(page[-1].doc_id) if len(memories) > size else ""
        self.lifecycle.check_live(shard)
        return Page(memories=[self.lifecycle.view(shard, m, now_ms=now) for m in page], next_token=token)

    async def history(self, principal: KeyScope, tenant_id: str, memory_id: str) -> tuple[list[Memory], str]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids([memory_id], limit=1)
        return self.lifecycle.history(shard, memory_id, now_ms=now_ms())

    async def confirm(self, principal: KeyScope, tenant_id: str,
                      memory_ids: Sequence[str]) -> list[tuple[Memory, tuple[str, ...]]]:
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        self.check_space()
        return await asyncio.get_running_loop().run_in_executor(
            self.write_pool, lambda: self.lifecycle.confirm(shard, memory_ids, key_id=principal.key_id, now_ms=now_ms()))

    async def touch(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str]) -> tuple[int, list[str]]:
        """Records that the client used these memories: one access each (what recency reads)."""
        shard = await self._shard(principal, tenant_id)
        validate_memory_ids(memory_ids, limit=self.config.limits.max_page_size)
        # The audit line is a file append: off the event loop, like the other lifecycle calls.
        return await asyncio.get_running_loop().run_in_executor(
            self.cpu_pool, lambda: self.lifecycle.touch(shard, memory_ids, key_id=principal.key_id, now_ms=now_ms()))

    async def forget(self, principal: KeyScope, tenant_id: str, spec: ForgetSpec) -> tuple[int, list[str]]:
        shard = await self._shard(principal, tenant_id)
        return await asyncio.get_running_loop().run_in_executor(
            self.write_pool, lambda: self.lifecycle.forget(shard, spec, key_id=principal.key_id, now_ms=now_ms()))

    async def audit(self, principal: KeyScope, tenant_id: str, *, page_size: int, page_token: str,
                    ops: frozenset[AuditOp], memory_id: str) -> tuple[list[AuditEntry], str]:
        shard = await self._shard(principal, tenant_id)
        limit = self.config.limits.max_page_size
        if not 0 <= page_size <= limit:
            raise InvalidArgument(f"page_size must be in [0, {limit}]")
        if memory_id:
            validate_memory_ids([memory_id], limit=1)
        after = _decode_token(page_token)
        entries, offset = await asyncio.get_running_loop().run_in_executor(
            self.cpu_pool, lambda: self.lifecycle.state(shard).audit.read(after=after, limit=page_size or 100,
                                                                          ops=ops, memory_id=memory_id))
        self.lifecycle.check_live(shard)
        return entries, _encode_token(offset) if offset >= 0 else ""

    # -- admin ------------------------------------------------------------------------------------------
    def require_admin(self, principal: KeyScope) -> None:
        if not principal.admin:
            raise PermissionDenied("this call needs an admin key")

    async def create_tenant(self, principal: KeyScope, tenant_id: str,
                            initial: Sequence[MemoryInput] = (), template_tenant_id: str = "") -> int:
        self.require_admin(principal)
        validate_tenant_id(tenant_id, max_len=self.config.limits.max_tenant_id_len)
        self.check_space()
        if initial:
            validate_memories(initial, limits=self.config.limits)
        copied: list[MemoryInput] = []
        if template_tenant_id:   # cold start: the template's ACTIVE memories, read before anything is created
            template = await self._shard(principal, template_tenant_id)
            now = now_ms()
            copied = [_as_input(m) for m in sorted(template.store.all(), key=lambda m: m.doc_id)
                      if m.status == MemoryStatus.ACTIVE and not is_expired(m, now)]
        await asyncio.get_running_loop().run_in_executor(self.write_pool, self.registry.create, tenant_id)
        step = self.config.limits.max_memories_per_write
        for chunk in (copied[i:i + step] for i in range(0, len(copied), step)):
            await self.write(principal, tenant_id, chunk)
        if initial:
            await self.write(principal, tenant_id, initial)
        return len(initial) + len(copied)

    async def delete_tenant(self, principal: KeyScope, tenant_id: str) -> int:
        """Purges a tenant: dropped from the catalog first (durable; no new request can reach it), then
        in-flight searches drain, then its shard closes and its directory (store, log, indexes, snapshots,
        audit log) and cached query embeddings are removed. Other tenants are never touched."""
        self.require_admin(principal)
        validate_tenant_id(tenant_id, max_len=self.config.limits.max_tenant_id_len)
        loop = asyncio.get_running_loop()
        shard = await loop.run_in_executor(self.write_pool, self.registry.drop, tenant_id)
        if shard is not None:
            state = await loop.run_in_executor(self.write_pool, self.lifecycle.mark_dropped, shard)
            await self.lifecycle.drained(state)
        self.query_cache.forget_tenant(tenant_id)
        self.search_batcher.forget_tenant(tenant_id)
        self.pair_cache.forget_tenant(tenant_id)
        self.write_batcher.forget_tenant(tenant_id)
        count = await loop.run_in_executor(self.write_pool, self.lifecycle.destroy, shard, tenant_id)
        log.info("tenant %s deleted (%d memories loaded at the time)", tenant_id, count)
        return count

    def list_tenants(self, principal: KeyScope) -> list[str]:
        return [t for t in self.registry.catalog.tenants() if principal.covers(t)]

    def create_key(self, principal: KeyScope, *, name: str, tenant_ids: list[str], prefixes: list[str],
                   admin: bool) -> tuple[str, str]:
        self.require_admin(principal)
        self.check_space()
        return self.registry.catalog.create_key(name=name, tenant_ids=tenant_ids, prefixes=prefixes, admin=admin)

    def revoke_key(self, principal: KeyScope, key_id: str) -> None:
        self.require_admin(principal)
        self.registry.catalog.revoke_key(key_id)
        log.info("key %s revoked", key_id)

    def rotate_key(self, principal: KeyScope, key_id: str) -> str:
        self.require_admin(principal)
        secret = self.registry.catalog.rotate_key(key_id)
        log.info("key %s rotated", key_id)
        return secret

    def info(self) -> dict[str, Any]:
        c = self.config
        return {
            "device": self.device,
            "embedder": self.embedder.describe(),
            "reranker": self.reranker.describe() if self.reranker is not None else None,
            # The limits in effect: with batching off a batch is one request and nothing waits.
            "limits": c.limits, "rrf_k": c.search.rrf_k,
            "batching": dataclasses.replace(c.batching, max_batch_requests=self.search_batcher.max_requests,
                                            max_wait_ms=self.search_batcher.max_wait_s * 1000.0),
            "half_life_s": {"EPISODIC": c.scoring.episodic_half_life_s, "SEMANTIC": c.scoring.semantic_half_life_s,
                            "PROCEDURAL": c.scoring.procedural_half_life_s},
            "rerank_control": self.controller.state() if self.controller is not None else None,
        }

    def stats(self, principal: KeyScope, tenant_id: str = "") -> dict[str, Any]:
        """The tenant registry's state (admin only): loaded tenants, index tiers, memory budget."""
        self.require_admin(principal)
        if tenant_id:
            validate_tenant_id(tenant_id, max_len=self.config.limits.max_tenant_id_len)
        out = self.registry.stats(tenant_id)
        out["storage"] = self.storage_stats()
        queues = [self.search_batcher.tenant_depths(), self.write_batcher.tenant_depths()]
        for t in out["tenants"]:   # fair share: each tenant's queued requests and RESOURCE_EXHAUSTED answers
            t["queued"] = sum(q.get(t["tenant_id"], (0, 0))[0] for q in queues)
            t["rejected"] = sum(q.get(t["tenant_id"], (0, 0))[1] for q in queues)
        return out

    def storage_stats(self, *, top_n: int = 10) -> dict[str, Any]:
        """Free space against the watermark, and log / audit bytes over every tenant (totals, the top
        ``top_n`` by log bytes): read from the files, so unloaded tenants count too."""
        usage = self.registry.disk_usage()
        report = self.space.report() if self.space is not None else None
        top = sorted(usage, key=lambda u: (-u["log_bytes"], u["tenant_id"]))[:top_n]
        return {"free_bytes": report.free_bytes if report else 0, "total_bytes": report.total_bytes if report else 0,
                "min_free_bytes": report.min_free_bytes if report else 0, "low": bool(report and report.low),
                "writes_refused": report.writes_refused if report else 0,
                "full_events": report.full_events if report else 0,
                "log_bytes": sum(u["log_bytes"] for u in usage), "audit_bytes": sum(u["audit_bytes"] for u in usage),
                "compactions": self.registry.compactions, "top_tenants": top}

    def flush(self) -> None:
        self.lifecycle.flush()
        self.registry.flush()
        self.registry.maintain()


def _as_input(m: Memory) -> MemoryInput:
    return MemoryInput(content=m.content, type=m.type, importance=m.importance, created_at_ms=m.created_at_ms,
                       entities=m.entities, source_ref=m.source_ref, scope=m.scope, confidence=m.confidence,
                       key=m.key, pinned=m.pinned, expires_at_ms=m.expires_at_ms, metadata=dict(m.metadata),
                       last_access_at_ms=m.last_access_at_ms, context=m.context)


def _encode_token(doc_id: int) -> str:
    return base64.urlsafe_b64encode(f"d{doc_id}".encode()).decode()


def _decode_token(token: str) -> int:
    if not token:
        return 0
    try:
        raw = base64.urlsafe_b64decode(token.encode()).decode()
        if not raw.startswith("d"):
            raise ValueError(raw)
        return int(raw[1:])
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument("page_token is not one this server issued") from exc
