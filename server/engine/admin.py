"""The admin RPCs: tenants (create from a template, delete with a drain, list, per-tenant settings), keys,
and the server's own state (info, stats, storage). The facade authorizes; this module does the work.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from server.batching.batcher import Batcher
from server.batching.controller import RerankController
from server.batching.pair_cache import PairScoreCache
from server.batching.query_cache import QueryEmbeddingCache
from server.config import ServerConfig
from server.domain import KeyScope, Memory, MemoryInput, MemoryStatus, WriteResult, is_expired
from server.engine.search import RRF_K
from server.engine.validation import validate_memories
from server.errors import NotFound
from server.store.space import DiskSpace
from server.tenants.registry import TenantRegistry
from server.tenants.settings import TenantSettings, checked_update
from server.tenants.shard import TenantShard

log = logging.getLogger(__name__)

Write = Callable[[KeyScope, str, Sequence[MemoryInput]], Awaitable[list[WriteResult]]]


@dataclasses.dataclass(frozen=True)
class BatchingInfo:
    """The search batcher's limits in effect (the Info RPC): with batching off a batch is one request and
    nothing waits."""

    enabled: bool
    max_batch_requests: int
    max_batch_tokens: int
    max_wait_ms: float
    queue_capacity: int


class Admin:
    def __init__(self, *, config: ServerConfig, registry: TenantRegistry, write_pool: Executor,
                 space: DiskSpace | None, batchers: Sequence[Batcher[Any]], query_cache: QueryEmbeddingCache,
                 pair_cache: PairScoreCache, controller: RerankController | None,
                 describe: Callable[[], dict[str, Any]], clock: Callable[[], int]) -> None:
        self.config = config
        self.registry = registry
        self.write_pool = write_pool
        self.space = space
        self.batchers = list(batchers)   # search, write-embed: per-tenant queues and rejections
        self.query_cache = query_cache
        self.pair_cache = pair_cache
        self.controller = controller
        self.describe = describe   # device and models, for Info
        self.clock = clock

    def check_space(self) -> None:
        """Admission for writes that add data: below the free-space watermark, StorageFull (RESOURCE_EXHAUSTED)
        before any work. Delete and Forget pass (they free space; ENOSPC still answers them "storage full")."""
        if self.space is not None:
            self.space.check_writable()

    # -- tenants ----------------------------------------------------------------------------------------
    async def create_tenant(self, principal: KeyScope, tenant_id: str, initial: Sequence[MemoryInput],
                            template: TenantShard | None, write: Write) -> int:
        self.check_space()
        if initial:
            validate_memories(initial, limits=self.config.limits)
        copied: list[MemoryInput] = []
        if template is not None:   # cold start: the template's ACTIVE memories, read before anything is created
            copied = template_copies(template, now_ms=self.clock())
        await asyncio.get_running_loop().run_in_executor(self.write_pool, self.registry.create, tenant_id)
        step = self.config.limits.max_memories_per_write
        for chunk in (copied[i:i + step] for i in range(0, len(copied), step)):
            await write(principal, tenant_id, chunk)   # copies carry their importance: min_salience keeps them
        stored = [r for r in await write(principal, tenant_id, initial) if r.memory_id] if initial else []
        return len(stored) + len(copied)   # initial memories below memory.min_salience (SKIPPED) not counted

    async def delete_tenant(self, tenant_id: str) -> int:
        """Purges a tenant: dropped from the catalog first (durable; no new request can reach it), then
        in-flight searches drain, then its shard closes and its directory (store, log, indexes, snapshots,
        audit log) and cached query embeddings are removed. Other tenants are never touched."""
        loop = asyncio.get_running_loop()
        shard = await loop.run_in_executor(self.write_pool, self.registry.drop, tenant_id)
        if shard is not None:
            await loop.run_in_executor(self.write_pool, shard.mark_dropped)
            await shard.drained()
        self.query_cache.forget_tenant(tenant_id)
        self.pair_cache.forget_tenant(tenant_id)
        for batcher in self.batchers:
            batcher.forget_tenant(tenant_id)
        count = await loop.run_in_executor(self.write_pool, self.registry.destroy, shard, tenant_id)
        log.info("tenant %s deleted (%d memories loaded at the time)", tenant_id, count)
        return count

    def list_tenants(self, principal: KeyScope) -> list[str]:
        return [t for t in self.registry.catalog.tenants() if principal.covers(t)]

    def settings(self, tenant_id: str) -> tuple[TenantSettings, TenantSettings]:
        """The tenant's own settings and the ones in effect (unset: the server's config)."""
        if not self.registry.catalog.has_tenant(tenant_id):
            raise NotFound(f"tenant {tenant_id!r} does not exist")
        own = self.registry.catalog.settings(tenant_id)
        return own, own.effective(self.config.memory)

    async def update_settings(self, principal: KeyScope, tenant_id: str, *, values: dict[str, float],
                              reset: Sequence[str]) -> tuple[TenantSettings, TenantSettings]:
        """Sets and resets per-tenant settings, all or nothing (server/tenants/settings.py), durably."""
        checked, names = checked_update(values, reset)
        self.check_space()
        own = await asyncio.get_running_loop().run_in_executor(
            self.write_pool, self.registry.catalog.update_settings, tenant_id, checked, names)
        log.info("tenant %s settings now %s (key %s)", tenant_id, own, principal.key_id)
        return own, own.effective(self.config.memory)

    # -- keys -------------------------------------------------------------------------------------------
    def create_key(self, *, name: str, tenant_ids: list[str], prefixes: list[str], admin: bool) -> tuple[str, str]:
        self.check_space()
        return self.registry.catalog.create_key(name=name, tenant_ids=tenant_ids, prefixes=prefixes, admin=admin)

    def revoke_key(self, key_id: str) -> None:
        self.registry.catalog.revoke_key(key_id)
        log.info("key %s revoked", key_id)

    def rotate_key(self, key_id: str) -> str:
        secret = self.registry.catalog.rotate_key(key_id)
        log.info("key %s rotated", key_id)
        return secret

    # -- the server's state -------------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        c = self.config
        search = self.batchers[0]
        return {
            **self.describe(),
            "limits": c.limits, "rrf_k": RRF_K,
            "batching": BatchingInfo(enabled=search.max_requests > 1, max_batch_requests=search.max_requests,
                                     max_batch_tokens=search.max_tokens, max_wait_ms=search.max_wait_s * 1000.0,
                                     queue_capacity=search.capacity),
            "half_life_s": c.scoring.half_lives(),
            "rerank_control": self.controller.state() if self.controller is not None else None,
        }

    def stats(self, tenant_id: str = "") -> dict[str, Any]:
        """The tenant registry's state: loaded tenants, index tiers, memory budget, storage, queues."""
        out = self.registry.stats(tenant_id)
        out["storage"] = self.storage_stats()
        queues = [b.tenant_depths() for b in self.batchers]
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


def template_copies(template: TenantShard, *, now_ms: int) -> list[MemoryInput]:
    """What a tenant created from ``template`` starts with: its ACTIVE, unexpired memories, in doc order (the
    Ray edge asks the template's replica for them: server/cluster/deployments.py)."""
    return [_as_input(m) for m in sorted(template.store.all(), key=lambda m: m.doc_id)
            if m.status == MemoryStatus.ACTIVE and not is_expired(m, now_ms)]


def _as_input(m: Memory) -> MemoryInput:
    return MemoryInput(content=m.content, type=m.type, importance=m.importance, created_at_ms=m.created_at_ms,
                       entities=m.entities, source_ref=m.source_ref, scope=m.scope, confidence=m.confidence,
                       key=m.key, pinned=m.pinned, expires_at_ms=m.expires_at_ms, metadata=dict(m.metadata),
                       last_access_at_ms=m.last_access_at_ms, context=m.context)
