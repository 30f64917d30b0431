"""The consolidation job: one owner (the engine builds one) that runs :mod:`server.hygiene.consolidate` for a
tenant now (the Consolidate RPC) or for every loaded tenant written since its last run, every
``memory.consolidate_interval_s``. Finding clusters runs on the CPU pool, the commit on the write pool under
the shard's write lock, re-checking each member there (a write may have changed it meanwhile)."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor

import numpy as np

from server.config import MemoryConfig
from server.domain import AuditOp, AuditRef, Consolidation, ConsolidationReport, MemoryStatus
from server.engine.write import new_memory_id
from server.hygiene.consolidate import (CONSOLIDATE_COSINE, Cluster, candidates, find_clusters, mark_members, orphans,
                                        semantic_for)
from server.store.audit import refs_of
from server.tenants.registry import TenantRegistry
from server.tenants.shard import TenantShard
from server.text import memory_text

log = logging.getLogger(__name__)

Embed = Callable[[str, list[str]], Awaitable[np.ndarray]]


def _now_ms() -> int:
    return int(time.time() * 1000)


class Consolidator:
    def __init__(self, *, cfg: MemoryConfig, registry: TenantRegistry, embed: Embed,
                 cpu_pool: Executor, write_pool: Executor) -> None:
        self.cfg = cfg
        self.registry = registry
        self.embed = embed
        self.cpu_pool = cpu_pool
        self.write_pool = write_pool
        self._seen: weakref.WeakKeyDictionary[TenantShard, int] = weakref.WeakKeyDictionary()
        self._task: asyncio.Task[None] | None = None

    # -- one tenant ---------------------------------------------------------------------------------------
    async def run(self, shard: TenantShard, *, dry_run: bool = False, key_id: str = "") -> ConsolidationReport:
        loop = asyncio.get_running_loop()
        restored = 0 if dry_run else await loop.run_in_executor(self.write_pool, self.restore, shard, key_id)
        clusters = await loop.run_in_executor(self.cpu_pool, self._find, shard)
        if dry_run or not clusters:
            self._seen[shard] = shard.store.seq
            return ConsolidationReport(clusters=tuple(Consolidation(memory_id="", members=tuple(
                m.memory_id for m in c.members), content=c.representative.content) for c in clusters),
                restored=restored)
        texts = [memory_text(semantic_for(c, memory_id="", doc_id=0, now_ms=0)) for c in clusters]
        vectors = await self.embed(shard.tenant_id, texts)
        done = await loop.run_in_executor(self.write_pool, self._commit, shard, clusters, vectors, key_id)
        self._seen[shard] = shard.store.seq
        return ConsolidationReport(clusters=tuple(done), restored=restored)

    def _find(self, shard: TenantShard) -> list[Cluster]:
        memories = candidates(shard.store.all())
        if len(memories) < 2:
            return []
        ids, vectors = shard.dense.export()
        row = {int(d): i for i, d in enumerate(ids.tolist())}
        memories = [m for m in memories if m.doc_id in row]
        return find_clusters(memories, vectors[[row[m.doc_id] for m in memories]], cosine=CONSOLIDATE_COSINE)

    def _commit(self, shard: TenantShard, clusters: Sequence[Cluster], vectors: np.ndarray,
                key_id: str) -> list[Consolidation]:
        done: list[Consolidation] = []
        with shard.write_lock:
            shard.check_live()
            now = _now_ms()
            puts, updates, audit = [], [], []
            doc_ids = shard.store.allocate_doc_ids(len(clusters))
            for cluster, vector, doc_id in zip(clusters, vectors, doc_ids, strict=True):
                current = [shard.store.get(m.memory_id) for m in cluster.members]
                if any(m is None or m.status != MemoryStatus.ACTIVE or m.consolidated_into for m in current):
                    continue   # changed since the clusters were found: the next run looks again
                cluster = Cluster(members=tuple(current), representative=cluster.representative)  # type: ignore[arg-type]
                semantic = semantic_for(cluster, memory_id=new_memory_id(), doc_id=doc_id, now_ms=now)
                puts.append((semantic, vector))
                updates.extend(mark_members(cluster, semantic.memory_id, now_ms=now))
                audit.append((semantic, [AuditRef(memory_id=m.memory_id, source_refs=m.source_refs,
                                                  related_id=semantic.memory_id) for m in cluster.members]))
                done.append(Consolidation(memory_id=semantic.memory_id, members=semantic.consolidates,
                                          content=semantic.content))
            if puts:
                shard.apply(puts=puts, updates=updates)
                shard.log_audit(AuditOp.WRITE, refs_of([s for s, _ in puts]), at_ms=now, key_id=key_id,
                                     note="consolidation")
                for semantic, refs in audit:
                    shard.log_audit(AuditOp.CONSOLIDATE, refs, at_ms=now, key_id=key_id,
                                         note=f"{len(refs)} episodic memories -> {semantic.memory_id}")
        if done:
            log.info("tenant %s: %d clusters consolidated", shard.tenant_id, len(done))
        return done

    def restore(self, shard: TenantShard, key_id: str = "") -> int:
        """Undo of a deleted consolidation: members whose semantic memory is gone are ACTIVE again."""
        with shard.write_lock:
            memories = shard.store.all()
            back = orphans(memories, {m.memory_id for m in memories})
            if back:
                shard.apply(updates=back)
                shard.log_audit(AuditOp.CONSOLIDATE, [AuditRef(memory_id=m.memory_id) for m in back],
                                     at_ms=_now_ms(), key_id=key_id, note="restored: the semantic memory was deleted")
            return len(back)

    # -- the background job ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self.cfg.consolidate_interval_s > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.consolidate_interval_s)
            await self.run_due()

    async def run_due(self) -> int:
        """One pass: every loaded tenant whose store changed since its last consolidation."""
        ran = 0
        for shard in self.registry.loaded():
            if self._seen.get(shard) == shard.store.seq:
                continue
            try:
                await self.run(shard)
                ran += 1
            except Exception:   # one tenant's failure must not stop the others' consolidation
                log.exception("consolidation of tenant %s failed", shard.tenant_id)
        return ran
