"""The memory lifecycle around the write and search pipelines: access bookkeeping, expiry, the capacity
cap, history, confirmation, forgetting, purges (of memories and of whole tenants) and the audit log.

Per loaded shard this keeps a ``ShardState`` (pending touches, the audit log, searches in flight, the
dropped flag), keyed weakly by the shard object so an evicted shard takes its state with it. Methods
named ``*_locked`` expect the caller to hold ``shard.write_lock``; the others take it themselves. All of
them are synchronous (executor threads) except ``enter_search``/``exit_search``/``drained``, which the
event loop calls.

Decisions: an access is a use: the first ``memory.access_top_hits`` hits of a live search (what enters a
prompt) or an explicit Touch; Get, List, History and the rest of a hit list do not count, and a search
"as of" a time (``scoring.now_ms`` set) does not count either: it replays the past and must not change it.
Forget ARCHIVE keeps memories (status ARCHIVED, listable, searchable by status); Forget DELETE purges them
and then rewrites the tenant's log, so no byte of a purged memory stays in the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from server.config import DAY_S, ServerConfig
from server.domain import (AuditOp, AuditRef, Filter, ForgetMode, ForgetSpec, KeyScope, Memory, MemoryInput,
                           MemoryStatus, MemoryType, QueryResult, SearchQuery, WriteOutcome, WriteResult,
                           effective_status, is_expired)
from server.engine.context import build_context_block
from server.engine.validation import validate_filter
from server.engine.write import Staging, activate
from server.errors import FailedPrecondition, InvalidArgument, NotFound
from server.store.access import TouchBuffer
from server.errors import is_storage_full
from server.store.audit import AuditLog, expire_segments, refs_of
from server.tenants.registry import TenantRegistry
from server.tenants.shard import TenantShard

log = logging.getLogger(__name__)

_LIVE = frozenset({MemoryStatus.ACTIVE, MemoryStatus.PENDING})
MAX_LISTED_IDS = 1000
AUDIT_SWEEP_EVERY_S = 3600.0   # how often retention also visits the tenants that are not loaded


@dataclass(eq=False)
class ShardState:
    touches: TouchBuffer
    audit: AuditLog
    in_flight: int = 0
    dropped: bool = False
    _loop_waiters: list[asyncio.Future[None]] = field(default_factory=list)


class Lifecycle:
    def __init__(self, *, config: ServerConfig, registry: TenantRegistry) -> None:
        self.config = config
        self.memory = config.memory
        self.registry = registry
        self._states: weakref.WeakKeyDictionary[TenantShard, ShardState] = weakref.WeakKeyDictionary()
        self._swept_at_s = 0.0
        registry.sweep_orphans()
        registry.can_evict = self._can_evict
        registry.before_evict.append(self._before_evict)

    def _can_evict(self, shard: TenantShard) -> bool:
        st = self._states.get(shard)
        return st is None or st.in_flight == 0

    def _before_evict(self, shard: TenantShard) -> None:
        """An evicted shard keeps nothing in memory only: pending touches are committed, the audit log closed."""
        st = self._states.get(shard)
        if st is None:
            return
        if len(st.touches):
            self.flush_touches(shard, st)
        st.audit.close()

    def state(self, shard: TenantShard) -> ShardState:
        st = self._states.get(shard)
        if st is None:
            st = self._states.setdefault(shard, ShardState(touches=TouchBuffer(), audit=self._audit_log(shard.directory)))
        return st

    def _audit_log(self, directory: Path) -> AuditLog:
        m = self.memory
        return AuditLog(directory, retention_s=m.audit_retention_days * DAY_S, max_bytes=m.audit_max_mb << 20,
                        segment_bytes=int(m.audit_segment_mb * (1 << 20)))

    def check_live(self, shard: TenantShard) -> None:
        if self.state(shard).dropped:
            raise NotFound(f"tenant {shard.tenant_id!r} does not exist")

    def audit(self, shard: TenantShard, op: AuditOp, refs: Sequence[AuditRef], *, at_ms: int, key_id: str = "",
              query: str = "", note: str = "") -> None:
        if refs or op == AuditOp.SEARCH:
            self.state(shard).audit.append(op, refs, at_ms=at_ms, key_id=key_id, query=query, note=note)

    # -- reads --------------------------------------------------------------------------------------
    def view(self, shard: TenantShard, memory: Memory, *, now_ms: int) -> Memory:
        """A memory as a client should see it: pending touches applied, a passed expiry shown as EXPIRED
        (and queued to be persisted by the next flush)."""
        st = self.state(shard)
        memory = st.touches.overlay(memory)
        if is_expired(memory, now_ms):
            st.touches.expired([memory.memory_id])
            memory = dataclasses.replace(memory, status=MemoryStatus.EXPIRED)
        return memory

    # -- search hooks (event loop) ---------------------------------------------------------------------
    def enter_search(self, shard: TenantShard) -> ShardState:
        st = self.state(shard)
        if st.dropped:
            raise NotFound(f"tenant {shard.tenant_id!r} does not exist")
        st.in_flight += 1
        return st

    def exit_search(self, st: ShardState) -> None:
        st.in_flight -= 1
        if st.in_flight == 0:
            for waiter in st._loop_waiters:
                if not waiter.done():
                    waiter.set_result(None)
            st._loop_waiters.clear()

    async def drained(self, st: ShardState) -> None:
        """Returns once no search holds the shard (call after marking it dropped)."""
        if st.in_flight > 0:
            waiter = asyncio.get_running_loop().create_future()
            st._loop_waiters.append(waiter)
            await waiter

    def after_search(self, shard: TenantShard, principal: KeyScope, queries: Sequence[SearchQuery],
                     results: list[QueryResult], *, now_ms: int) -> list[QueryResult]:
        """Drops hits purged while the search ran, shows expiry, records accesses (not for "as of"
        searches), appends the audit lines and builds the context blocks."""
        st = self.state(shard)
        if st.dropped:
            raise NotFound(f"tenant {shard.tenant_id!r} does not exist")
        out: list[QueryResult] = []
        for query, result in zip(queries, results, strict=True):
            hits = tuple(dataclasses.replace(h, memory=self.view(shard, h.memory, now_ms=now_ms))
                         for h in result.hits if shard.store.get(h.memory.memory_id) is not None)
            if not query.scoring.now_ms and self.memory.access_top_hits:
                # What counts as a use: the first few hits (what enters a prompt), not a whole top-100 list.
                st.touches.record((h.memory.memory_id for h in hits[:self.memory.access_top_hits]), now_ms=now_ms)
            if self.memory.audit_searches:
                self.audit(shard, AuditOp.SEARCH, refs_of([h.memory for h in hits]), at_ms=now_ms,
                           key_id=principal.key_id, query=query.text)
            floor = self.config.search.min_relevance if query.min_relevance is None else query.min_relevance
            block = (build_context_block([h for h in hits if h.breakdown.relevance >= floor],
                                         max_items=query.context_items) if query.context_block else "")
            out.append(dataclasses.replace(result, hits=hits, context_block=block))
        return out

    def touch(self, shard: TenantShard, memory_ids: Sequence[str], *, key_id: str,
              now_ms: int) -> tuple[int, list[str]]:
        """An explicit "used" signal (the Touch RPC): each known id counts as one access, committed by the
        next flush like a search's; unknown ids are returned and change nothing."""
        self.check_live(shard)
        looked_up = {i: shard.store.get(i) for i in dict.fromkeys(memory_ids)}
        found = [m for m in looked_up.values() if m is not None]
        missing = [i for i, m in looked_up.items() if m is None]
        self.state(shard).touches.record((m.memory_id for m in found), now_ms=now_ms)
        self.audit(shard, AuditOp.USE, refs_of(found), at_ms=now_ms, key_id=key_id)
        return len(found), missing

    # -- writes -------------------------------------------------------------------------------------
    def after_write_locked(self, shard: TenantShard, inputs: Sequence[MemoryInput], results: Sequence[WriteResult],
                           *, key_id: str, now_ms: int) -> None:
        """Audit lines for a committed write, then the capacity cap."""
        get = shard.store.get
        created = [m for r in results if r.outcome != WriteOutcome.MERGED and (m := get(r.memory_id)) is not None]
        self.audit(shard, AuditOp.WRITE, refs_of(created), at_ms=now_ms, key_id=key_id)
        merged = [AuditRef(memory_id=r.merged_into, source_refs=(inp.source_ref,) if inp.source_ref else ())
                  for inp, r in zip(inputs, results, strict=True) if r.outcome == WriteOutcome.MERGED]
        self.audit(shard, AuditOp.MERGE, merged, at_ms=now_ms, key_id=key_id)
        self._audit_superseded(shard, results, key_id=key_id, now_ms=now_ms)
        self.enforce_capacity_locked(shard, keep={r.memory_id for r in results}, now_ms=now_ms)

    def _audit_superseded(self, shard: TenantShard, results: Sequence[object], *, key_id: str, now_ms: int) -> None:
        refs = [AuditRef(memory_id=old, source_refs=tuple(m.source_refs) if (m := shard.store.get(old)) else (),
                         related_id=r.memory_id)  # type: ignore[attr-defined]
                for r in results for old in r.superseded]  # type: ignore[attr-defined]
        self.audit(shard, AuditOp.SUPERSEDE, refs, at_ms=now_ms, key_id=key_id)

    def decayed_importance(self, m: Memory, *, now_ms: int) -> float:
        s = self.config.scoring
        half_life = {MemoryType.EPISODIC: s.episodic_half_life_s, MemoryType.SEMANTIC: s.semantic_half_life_s,
                     MemoryType.PROCEDURAL: s.procedural_half_life_s}[m.type]
        if m.pinned or half_life <= 0:
            return m.importance
        return m.importance * 0.5 ** (max(0.0, (now_ms - m.last_access_at_ms) / 1000.0) / half_life)

    def enforce_capacity_locked(self, shard: TenantShard, *, keep: set[str], now_ms: int) -> list[str]:
        """Archives the least valuable dynamic memories (lowest decayed importance, then least recently
        used) until at most ``capacity_per_tenant`` are live. Pinned memories and ``keep`` (the write just
        acknowledged) are never archived, so the cap can be exceeded when only those remain."""
        cap = self.memory.capacity_per_tenant
        if cap <= 0 or len(shard.store) <= cap:
            return []
        live = [m for m in shard.store.all() if m.status in _LIVE]
        excess = len(live) - cap
        if excess <= 0:
            return []
        candidates = sorted((m for m in live if not m.pinned and m.memory_id not in keep),
                            key=lambda m: (self.decayed_importance(m, now_ms=now_ms), m.last_access_at_ms, m.doc_id))
        doomed = [dataclasses.replace(m, status=MemoryStatus.ARCHIVED, updated_at_ms=now_ms)
                  for m in candidates[:excess]]
        if doomed:
            shard.apply(updates=doomed)
            self.audit(shard, AuditOp.ARCHIVE, refs_of(doomed), at_ms=now_ms, note="capacity")
        return [m.memory_id for m in doomed]

    # -- history and confirmation -------------------------------------------------------------------
    def history(self, shard: TenantShard, memory_id: str, *, now_ms: int) -> tuple[list[Memory], str]:
        start = shard.store.get(memory_id)
        if start is None:
            raise NotFound(f"memory {memory_id!r} does not exist")
        seen: dict[str, Memory] = {}
        todo = [start]
        while todo:
            m = todo.pop()
            if m.memory_id in seen:
                continue
            seen[m.memory_id] = m
            for other in (*m.supersedes, m.superseded_by):
                found = shard.store.get(other) if other else None
                if found is not None and found.memory_id not in seen:
                    todo.append(found)
        chain = sorted(seen.values(), key=lambda m: (m.created_at_ms, m.doc_id))
        self.check_live(shard)
        views = [self.view(shard, m, now_ms=now_ms) for m in chain]
        tips = [m for m in views if not m.superseded_by]
        latest = next((m for m in reversed(tips) if m.status in _LIVE), tips[-1] if tips else views[-1])
        return views, latest.memory_id

    def confirm(self, shard: TenantShard, memory_ids: Sequence[str], *, key_id: str,
                now_ms: int) -> list[tuple[Memory, tuple[str, ...]]]:
        with shard.write_lock:
            self.check_live(shard)
            staging = Staging(shard)
            for memory_id in memory_ids:
                m = staging.current(memory_id)
                if m is None:
                    raise NotFound(f"memory {memory_id!r} does not exist")
                if effective_status(m, now_ms) not in (MemoryStatus.PENDING, MemoryStatus.ACTIVE):
                    raise FailedPrecondition(f"memory {memory_id!r} is {effective_status(m, now_ms).name}; "
                                             "only PENDING memories can be confirmed")
            done = []
            for memory_id in dict.fromkeys(memory_ids):
                m = staging.current(memory_id)
                superseded = activate(staging, memory_id, now_ms=now_ms) if m and m.status == MemoryStatus.PENDING else ()
                done.append((memory_id, superseded))
            shard.apply(updates=list(staging.updates.values()))
            final = {i: (shard.store.get(i), s) for i, s in done}
            self.audit(shard, AuditOp.CONFIRM, refs_of([m for m, _ in final.values() if m]), at_ms=now_ms,
                       key_id=key_id)
            self._audit_superseded(shard, [_Superseded(i, s) for i, s in done], key_id=key_id, now_ms=now_ms)
        return [final[i] for i in memory_ids]  # type: ignore[misc]

    # -- forgetting and purges ----------------------------------------------------------------------
    def forget(self, shard: TenantShard, spec: ForgetSpec, *, key_id: str, now_ms: int) -> tuple[int, list[str]]:
        validate_filter(spec.filter, where="filter")
        if spec.older_than_ms < 0:
            raise InvalidArgument("older_than_ms must be >= 0")
        if spec.filter == Filter() and not spec.older_than_ms and not spec.all:
            raise InvalidArgument("forget needs a filter or older_than_ms; set all=true to forget every memory")
        statuses = spec.filter.statuses or (_LIVE if spec.mode == ForgetMode.ARCHIVE else frozenset())
        cutoff = now_ms - spec.older_than_ms if spec.older_than_ms else 0
        with shard.write_lock:
            self.check_live(shard)
            chosen = sorted((m for m in shard.store.all()
                             if spec.filter.matches(m, statuses=statuses, now_ms=now_ms)
                             and (spec.include_pinned or not m.pinned) and (not cutoff or m.created_at_ms < cutoff)
                             and not (spec.mode == ForgetMode.ARCHIVE and m.status == MemoryStatus.ARCHIVED)),
                            key=lambda m: m.doc_id)
            ids = [m.memory_id for m in chosen]
            if spec.dry_run or not chosen:
                return len(ids), ids[:MAX_LISTED_IDS]
            if spec.mode == ForgetMode.DELETE:
                self.purge_locked(shard, ids, key_id=key_id, now_ms=now_ms, compact=True, note="forget")
            else:
                archived = [dataclasses.replace(m, status=MemoryStatus.ARCHIVED, updated_at_ms=now_ms) for m in chosen]
                shard.apply(updates=archived)
                self.audit(shard, AuditOp.ARCHIVE, refs_of(archived), at_ms=now_ms, key_id=key_id, note="forget")
        if spec.mode == ForgetMode.DELETE:
            shard.save_dense_snapshot()   # an IVF snapshot on disk must not keep the purged vectors
        return len(ids), ids[:MAX_LISTED_IDS]

    def purge_locked(self, shard: TenantShard, memory_ids: Sequence[str], *, key_id: str, now_ms: int,
                     compact: bool, note: str = "") -> int:
        """Deletes memories from the store, FAISS and Lucene in one log group, and strips them from the
        supersede links of the memories that remain (so History never names them). With ``compact``, the
        Lucene commit and the log rewrite follow, so nothing of them stays on disk in the store."""
        doomed = {i: m for i in dict.fromkeys(memory_ids) if (m := shard.store.get(i)) is not None}
        if not doomed:
            return 0
        relinked: dict[str, Memory] = {}
        for m in doomed.values():
            for other_id in (*m.supersedes, m.superseded_by):
                other = relinked.get(other_id) or shard.store.get(other_id) if other_id else None
                if other is None or other.memory_id in doomed:
                    continue
                relinked[other.memory_id] = dataclasses.replace(
                    other, supersedes=tuple(s for s in other.supersedes if s not in doomed),
                    superseded_by="" if other.superseded_by in doomed else other.superseded_by)
        shard.apply(updates=list(relinked.values()), deletes=list(doomed))
        self.audit(shard, AuditOp.DELETE, refs_of(list(doomed.values())), at_ms=now_ms, key_id=key_id, note=note)
        if compact:
            shard.lexical.commit(shard.store.seq)
            size = shard.store.compact()
            log.info("tenant %s: purged %d memories; log compacted to %d bytes", shard.tenant_id, len(doomed), size)
        return len(doomed)

    def delete(self, shard: TenantShard, memory_ids: Sequence[str], *, key_id: str, now_ms: int) -> tuple[int, list[str]]:
        with shard.write_lock:
            self.check_live(shard)
            missing = [i for i in memory_ids if shard.store.get(i) is None]
            return self.purge_locked(shard, memory_ids, key_id=key_id, now_ms=now_ms, compact=False), missing

    def mark_dropped(self, shard: TenantShard) -> ShardState:
        st = self.state(shard)
        with shard.write_lock:
            st.dropped = True
        return st

    def destroy(self, shard: TenantShard | None, tenant_id: str) -> int:
        """After ``mark_dropped`` and ``drained``: closes the shard and removes the tenant's directory."""
        count = 0
        if shard is not None:
            count = len(shard.store)
            self.state(shard).audit.close()
            shard.close()
        shutil.rmtree(self.registry.directory(tenant_id), ignore_errors=True)
        return count

    # -- the periodic flush --------------------------------------------------------------------------
    def flush(self) -> None:
        """Commits pending touches and found expiries of every loaded shard, one log group each, and
        fsyncs the audit logs. Runs every flush interval and at shutdown."""
        loaded = self.registry.loaded()
        for shard in loaded:
            st = self._states.get(shard)
            if st is None:
                continue
            try:
                if len(st.touches):
                    self.flush_touches(shard, st)
            except Exception as exc:
                if not is_storage_full(exc):
                    raise
                # access counts are a ranking signal: this interval's are dropped, nothing else is lost
                log.warning("tenant %s: no space to flush access counts", shard.tenant_id)
            st.audit.sync()
            st.audit.maintain()   # retention: a listdir and a stat per segment
        now_s = time.time()
        if now_s - self._swept_at_s >= AUDIT_SWEEP_EVERY_S:
            self._swept_at_s = now_s
            self._expire_unloaded_audit({s.directory for s in loaded}, now_s=now_s)

    def _expire_unloaded_audit(self, loaded_dirs: set[Path], *, now_s: float) -> None:
        """Audit retention also reaches tenants that stay unloaded (their newest segment is kept)."""
        m = self.memory
        for directory in self.registry.root.iterdir():
            if directory not in loaded_dirs and directory.is_dir():
                expire_segments(directory, now_s=now_s, retention_s=m.audit_retention_days * DAY_S,
                                max_bytes=m.audit_max_mb << 20)

    def flush_touches(self, shard: TenantShard, st: ShardState) -> int:
        with shard.write_lock:
            if st.dropped or getattr(shard, "closed", False):
                return 0
            now = int(time.time() * 1000)
            updates, expired = st.touches.drain(shard.store.get, now_ms=now)
            if updates:
                # Accesses alone ride in one compact log record; a memory found expired is a full update.
                expired_ids = {m.memory_id for m in expired}
                shard.apply(updates=[m for m in updates if m.memory_id in expired_ids],
                            accesses=[m for m in updates if m.memory_id not in expired_ids])
            self.audit(shard, AuditOp.EXPIRE, refs_of(expired), at_ms=now)
            return len(updates)


@dataclass(frozen=True)
class _Superseded:
    memory_id: str
    superseded: tuple[str, ...]
