"""The tenant registry: tenants exist in the catalog; their shards load lazily on first use and the
least recently used ones are evicted (flushed, snapshotted, closed) to stay under a memory budget.

A shard used within the last ``evict_idle_s`` is never evicted (a request may still hold it), so the
budget is soft by at most the tenants used in that window; the shard just loaded is never evicted.

``maintain`` (the periodic flush calls it) starts the background work of the loaded shards: a log
compaction where the log holds ``compact_ratio`` times its live data and at least ``compact_min_bytes``
(one compaction thread; never while the disk lacks room for the new log above the watermark), and the
rebuild of a lexical index that a full disk left stale (only with room for it above the watermark, and not
during the backoff after a rebuild that met a full disk again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from server.errors import NotFound, is_storage_full
from server.gcpauses import freeze_loaded, paused
from server.index.dense import FlatDenseIndex
from server.index.tiered import VectorIndex
from server.index.tiers import TierRules
from server.store.audit import AuditPolicy, audit_bytes
from server.store.durable_log import LogOpener
from server.store.memory_store import LOG_FILE
from server.store.space import DiskSpace
from server.tenants.catalog import Catalog
from server.tenants.shard import TenantShard

log = logging.getLogger(__name__)

# A shard used this recently is never evicted: a request that found it may still hold it. Two seconds cover a
# search's slowest stage many times over and leave the budget soft by at most the tenants used in them.
EVICT_IDLE_S = 2.0
BUILD_THREADS = 1   # background index builds: one at a time, so a build never takes a second core from searches

AUDIT_SWEEP_EVERY_S = 3600.0   # how often audit retention also visits the tenants that are not loaded


def tenant_dirname(tenant_id: str) -> str:
    return hashlib.sha256(tenant_id.encode()).hexdigest()[:32]


def _abandon(shard: TenantShard) -> None:
    """Closes a shard whose log moved on or needs a reload, committing nothing; whatever its close meets, the
    next load replays from the log."""
    try:
        shard.abandon()
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.info("tenant %s: abandoned shard did not close cleanly (%s)", shard.tenant_id, exc)


class TenantRegistry:
    def __init__(self, *, data_dir: Path, catalog: Catalog, dim: int, rules: TierRules | None = None,
                 memory_budget_bytes: int = 0, evict_idle_s: float = EVICT_IDLE_S, build_threads: int = BUILD_THREADS,
                 flat_factory: Callable[[int], VectorIndex] = FlatDenseIndex, space: DiskSpace | None = None,
                 compact_ratio: float = 2.0, compact_min_bytes: int = 4 << 20,
                 audit: AuditPolicy | None = None, open_log: Callable[[str], LogOpener] | None = None,
                 drop_log: Callable[[str], int] | None = None, gc_freeze: bool = True) -> None:
        self.root = data_dir / "tenants"
        self.root.mkdir(parents=True, exist_ok=True)
        self.catalog = catalog
        self.dim = dim
        self.rules = (rules or TierRules()).validate()
        self.memory_budget_bytes = memory_budget_bytes
        self.evict_idle_s = evict_idle_s
        self.flat_factory = flat_factory   # the exact small tier (FAISS flat; a GPU twin may go here)
        self.audit = audit or AuditPolicy()   # each shard's audit log; retention also visits unloaded tenants
        self.open_log = open_log   # tenant id → its log opener (object storage); None: each tenant's local file
        # Deletes a tenant's remote log (ObjectLogBackend.drop_tenant) when the tenant is destroyed, and before a
        # tenant id is created, a leftover of an earlier tenant of that id whose drop a crash cut short (else its
        # memories would come back). Only where this registry's catalog is the authority (not a Ray replica's).
        self.drop_log = drop_log
        self.gc_freeze = gc_freeze   # gc.freeze after each load (tenants.gc_tuning, server/gcpauses.py)
        self._audit_swept_s = 0.0
        self._builder = ThreadPoolExecutor(max(1, build_threads), thread_name_prefix="index-build")
        self.space = space
        self.compact_ratio = compact_ratio
        self.compact_min_bytes = compact_min_bytes
        self._compactor = ThreadPoolExecutor(1, thread_name_prefix="compact")
        self._compacting: set[str] = set()
        self.compactions = 0
        self._shards: OrderedDict[str, TenantShard] = OrderedDict()   # least recently used first
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self.loads = 0
        self.evictions = 0
        self.load_s_total = 0.0
        self.evict_s_total = 0.0

    def directory(self, tenant_id: str) -> Path:
        return self.root / tenant_dirname(tenant_id)

    def create(self, tenant_id: str) -> None:
        directory = self.directory(tenant_id)
        with self._gate(tenant_id):
            if not self.catalog.has_tenant(tenant_id):   # leftovers of a tenant that was dropped
                if directory.exists():
                    shutil.rmtree(directory)
                if self.drop_log is not None:
                    self.drop_log(tenant_id)
            self.catalog.create_tenant(tenant_id)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tenant.json").write_text(json.dumps({"tenant_id": tenant_id}))

    def _gate(self, tenant_id: str) -> threading.Lock:
        with self._lock:
            return self._loading.setdefault(tenant_id, threading.Lock())

    def _touch_loaded(self, tenant_id: str) -> TenantShard | None:
        """The loaded shard, marked most recently used; None when it is not loaded, or when its log needs a
        reload (object storage: a commit's outcome is unknown, or another owner fenced it), in which case the
        shard is closed without committing and the caller's :meth:`shard` loads it afresh (replay + fence)."""
        with self._lock:
            shard = self._shards.get(tenant_id)
            if shard is not None and shard.store.needs_reload:
                del self._shards[tenant_id]
                stale, shard = shard, None
            elif shard is not None:
                self._shards.move_to_end(tenant_id)
                shard.touch()
                return shard
            else:
                return None
        _abandon(stale)   # its index caches stay: the reload replays past them (or rebuilds them past a compaction)
        log.warning("tenant %s: its log needs a reload (a commit's outcome is unknown, or another owner took it); "
                    "reloading", tenant_id)
        return None

    def holds(self, tenant_id: str) -> bool:
        """Whether the tenant is loaded here and its log needs no reload (no lock, no I/O: the event loop may ask)."""
        shard = self._shards.get(tenant_id)
        return shard is not None and not shard.store.needs_reload

    def loaded_shard(self, tenant_id: str) -> TenantShard | None:
        """The shard if it is loaded and no memory budget is set, else None: no I/O, so the event loop
        may call it; :meth:`shard` does the rest on a worker thread. With a budget set, callers keep to
        :meth:`shard` (a conservative choice: for a loaded tenant it does the same)."""
        if self.memory_budget_bytes > 0:
            return None
        return self._touch_loaded(tenant_id)

    def shard(self, tenant_id: str) -> TenantShard:
        """The tenant's shard, loading it if needed (blocking: call from a worker thread)."""
        shard = self._touch_loaded(tenant_id)
        if shard is not None:
            return shard
        if not self.catalog.has_tenant(tenant_id):
            raise NotFound(f"tenant {tenant_id!r} does not exist")
        with self._gate(tenant_id):
            with self._lock:
                shard = self._shards.get(tenant_id)
            if shard is None:
                if not self.catalog.has_tenant(tenant_id):   # dropped while this request waited
                    raise NotFound(f"tenant {tenant_id!r} does not exist")
                started = time.perf_counter()
                with paused() if self.gc_freeze else contextlib.nullcontext():
                    shard = TenantShard.load(tenant_id, self.directory(tenant_id), dim=self.dim, rules=self.rules,
                                             builder=self._builder, flat_factory=self.flat_factory,
                                             audit=self.audit, open_log=self.open_log(tenant_id)
                                             if self.open_log is not None else None)
                with self._lock:
                    self._shards[tenant_id] = shard
                    self.loads += 1
                    self.load_s_total += time.perf_counter() - started
                if self.gc_freeze:
                    freeze_loaded()   # full collections no longer walk the loaded shards (server/gcpauses.py)
            shard.touch()
        self.enforce_budget(keep=tenant_id)
        return shard

    def used_bytes(self) -> int:
        return sum(s.ram_bytes() for s in self.loaded())

    def enforce_budget(self, *, keep: str = "") -> int:
        """Evicts least recently used idle shards until the loaded ones fit the budget; returns how many."""
        if self.memory_budget_bytes <= 0:
            return 0
        evicted = 0
        while True:
            with self._lock:
                sizes = {t: s.ram_bytes() for t, s in self._shards.items()}
                if sum(sizes.values()) <= self.memory_budget_bytes:
                    return evicted
                now = time.monotonic()
                victim = next((t for t, s in self._shards.items()
                               if t != keep and now - s.last_used_s >= self.evict_idle_s and s.evictable()), None)
            if victim is None:
                return evicted
            if self.evict(victim):
                evicted += 1

    def evict(self, tenant_id: str) -> bool:
        """Closes one tenant's shard (it commits its touches, snapshots and closes its files); the next
        request reloads it."""
        with self._gate(tenant_id):
            with self._lock:
                shard = self._shards.pop(tenant_id, None)
            if shard is None:
                return False
            started = time.perf_counter()
            shard.close()
            with self._lock:
                self.evictions += 1
                self.evict_s_total += time.perf_counter() - started
        log.info("tenant %s evicted in %.3fs", tenant_id, time.perf_counter() - started)
        return True

    def discard(self, tenant_id: str) -> bool:
        """Forgets a loaded shard whose log another owner took (fenced): closed without committing anything
        (its writes would be refused), and its local files removed, since they are caches of a log that moved
        on. The next request loads the tenant afresh (takes it over again, replays)."""
        with self._gate(tenant_id):
            with self._lock:
                shard = self._shards.pop(tenant_id, None)
            if shard is None:
                return False
            _abandon(shard)
            shutil.rmtree(self.directory(tenant_id), ignore_errors=True)
        log.warning("tenant %s discarded: another owner holds its log", tenant_id)
        return True

    def drop(self, tenant_id: str) -> TenantShard | None:
        """Drops the tenant from the catalog, durably (it can never load again; NotFound when unknown),
        and from the loaded shards; returns its shard if one was loaded. The caller purges shard and files."""
        with self._gate(tenant_id):
            self.catalog.drop_tenant(tenant_id)
            with self._lock:
                return self._shards.pop(tenant_id, None)

    def destroy(self, shard: TenantShard | None, tenant_id: str) -> int:
        """After :meth:`drop` and the shard's drain: closes the shard (if it was loaded) and removes the
        tenant's directory; returns how many memories the shard held."""
        count = 0
        if shard is not None:
            count = len(shard.store)
            shard.close()
        shutil.rmtree(self.directory(tenant_id), ignore_errors=True)
        if self.drop_log is not None:
            self.drop_log(tenant_id)
        return count

    def sweep_orphans(self) -> int:
        """Removes tenant directories the catalog no longer knows (a drop interrupted by a crash)."""
        removed = 0
        for directory in self.root.iterdir():
            marker = directory / "tenant.json"
            try:
                tenant_id = json.loads(marker.read_text())["tenant_id"]
            except (OSError, ValueError, KeyError):
                continue
            if not self.catalog.has_tenant(tenant_id):
                shutil.rmtree(directory, ignore_errors=True)
                removed += 1
                log.warning("removed the directory of dropped tenant %s", tenant_id)
        return removed

    def disk_usage(self) -> list[dict[str, Any]]:
        """Per tenant (loaded or not): the bytes of its memory log and of its audit segments."""
        out = []
        for tenant_id in self.catalog.tenants():
            directory = self.directory(tenant_id)
            try:
                log_bytes = (directory / LOG_FILE).stat().st_size
            except FileNotFoundError:
                log_bytes = 0
            out.append({"tenant_id": tenant_id, "log_bytes": log_bytes, "audit_bytes": audit_bytes(directory)})
        return out

    def loaded(self) -> list[TenantShard]:
        with self._lock:
            return list(self._shards.values())

    def stats(self, tenant_id: str = "") -> dict[str, Any]:
        """Registry totals and the loaded tenants' states (or one tenant's, loaded or not)."""
        shards = self.loaded()
        if tenant_id:
            if not self.catalog.has_tenant(tenant_id):
                raise NotFound(f"tenant {tenant_id!r} does not exist")
            tenants = [s.stats() for s in shards if s.tenant_id == tenant_id] or [
                {"tenant_id": tenant_id, "state": "UNLOADED"}]
        else:
            tenants = [s.stats() for s in shards]
        return {"total_tenants": len(self.catalog.tenants()), "loaded_tenants": len(shards),
                "memory_budget_bytes": self.memory_budget_bytes, "used_bytes": sum(s.ram_bytes() for s in shards),
                "loads": self.loads, "evictions": self.evictions,
                "load_ms_total": self.load_s_total * 1000.0, "evict_ms_total": self.evict_s_total * 1000.0,
                "tenants": tenants}

    def flush(self) -> None:
        """Each loaded shard's periodic flush (touches, audit, Lucene), and once an hour audit retention for
        the tenants that are not loaded."""
        loaded = self.loaded()
        for shard in loaded:
            try:
                shard.flush(periodic=True)
            except Exception as exc:
                if not is_storage_full(exc):
                    raise
                self._note_full()
        now_s = time.time()
        if now_s - self._audit_swept_s >= AUDIT_SWEEP_EVERY_S:
            self._audit_swept_s = now_s
            open_dirs = {s.directory for s in loaded}
            for directory in self.root.iterdir():
                if directory not in open_dirs and directory.is_dir():
                    self.audit.expire(directory, now_s=now_s)

    def _note_full(self) -> None:
        if self.space is not None:
            self.space.note_full()

    def _has_room(self, extra_bytes: int) -> bool:
        return self.space is None or self.space.has_room(extra_bytes)

    def repair_if_due(self, shard: TenantShard) -> bool:
        """Rebuilds the shard's stale lexical index when its repair is due and the disk has room for it (blocks:
        a worker thread's call)."""
        return shard.repair_due() and self._has_room(shard.lexical_rebuild_bytes()) and shard.repair_lexical()

    def maintain(self) -> list[Future[int | None]]:
        """Repairs stale lexical indexes and starts the compactions that are due; returns their futures."""
        started: list[Future[int | None]] = []
        for shard in self.loaded():
            self.repair_if_due(shard)
            store = shard.store
            with self._lock:
                if shard.tenant_id in self._compacting or shard.closed:
                    continue
                if not store.compaction_due(ratio=self.compact_ratio, min_bytes=self.compact_min_bytes):
                    continue
                if not self._has_room(store.live_bytes_estimate):
                    continue
                self._compacting.add(shard.tenant_id)
            started.append(self._compactor.submit(self._compact, shard))
        return started

    def compactions_running(self) -> int:
        with self._lock:
            return len(self._compacting)

    def _compact(self, shard: TenantShard) -> int | None:
        try:
            size = shard.compact()
            if size is not None:
                with self._lock:
                    self.compactions += 1
            return size
        except Exception as exc:
            if not is_storage_full(exc):
                log.exception("tenant %s: compaction failed; the log is unchanged", shard.tenant_id)
                return None
            self._note_full()
            log.warning("tenant %s: compaction met a full disk; the log is unchanged", shard.tenant_id)
            return None
        finally:
            with self._lock:
                self._compacting.discard(shard.tenant_id)

    def close(self) -> None:
        self._compactor.shutdown(wait=True, cancel_futures=True)   # a compaction in flight finishes
        with self._lock:
            shards = list(self._shards.values())
            self._shards.clear()
        for shard in shards:
            shard.close()
        self._builder.shutdown(wait=False, cancel_futures=True)   # a build in flight is dropped
