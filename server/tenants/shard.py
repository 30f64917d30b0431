"""One tenant's shard: the one owner of everything per tenant — its store, dense index and Lucene index,
its pending access touches, its audit log, the searches in flight and its state (loaded / building /
dropped / closed). Loaded together, changed together, flushed, evicted and purged as one unit: the
registry asks the shard whether it may be evicted and closes it; nothing else holds per-tenant state.

A shard only sees its own tenant's directory; there is no object that spans tenants. The dense index
is tiered (flat → IVF-HNSW, see ``server/index/tiered.py``); an IVF index is snapshotted to
``dense.snap`` after each promotion and when the shard closes, so a restart or a reload after eviction
does not re-train. A missing, corrupt or stale snapshot is rebuilt from the vectors in the store.

A full disk: a commit that cannot reach the log changes nothing (the store raises before applying). Lucene
closes its IndexWriter when a flush meets ENOSPC, so a lexical failure after a durable commit marks the
lexical index stale (searches keep the last reader; the write stays acknowledged: it is in the log, the
store and the dense index) and :meth:`TenantShard.repair_lexical` rebuilds it from the store once space
returns (at the periodic flush, and before the next Write to the tenant, which would otherwise take the room
first): the registry tries only when the disk has room for the rebuilt index (``lexical_rebuild_bytes``),
and after a rebuild that met a full disk again, not before a backoff (1 s doubling to a minute). A rebuild
holds the write lock; retried every flush interval on a disk that stayed full, it starved writes (found by
the tmpfs test: ten failed rebuilds in five seconds). A dense snapshot that cannot be written is skipped (it
is an optimisation of the next load).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from server.domain import AuditOp, AuditRef, Memory, MemoryStatus, is_expired
from server.errors import NotFound, is_storage_full
from server.index.dense import FlatDenseIndex
from server.index.ivf import ivf_payload
from server.index.tiered import TieredDenseIndex, VectorIndex
from server.index.tiers import TierRules
from server.lexical.lucene import LuceneIndex
from server.store.access import TouchBuffer
from server.store.audit import AuditLog, AuditPolicy, refs_of
from server.store.durable_log import LogOpener
from server.store.idempotency import Done
from server.store.memory_store import TenantStore
from server.store.snapshot import snapshot_bytes, write_snapshot
from server.tenants.lexical_slot import LexicalSlot
from server.tenants.loading import DENSE_SNAPSHOT, load_dense, load_lexical, restore_artefacts

log = logging.getLogger(__name__)

SHARD_FIXED_BYTES = 512 * 1024      # measured: an open Lucene index ~50 KiB heap, ~300 KiB RSS, 1 fd (+1 WAL fd)
MEMORY_BYTES = 700                  # a Memory object, its ids and its map entries, beside its content


class ShardState(enum.Enum):
    LOADED = "LOADED"
    BUILDING = "BUILDING"     # loaded; a dense index build runs in the background
    DROPPED = "DROPPED"       # the tenant was deleted: every call answers NotFound; it closes once drained
    CLOSED = "CLOSED"         # evicted or shut down: unusable


class TenantShard:
    def __init__(self, tenant_id: str, directory: Path, store: TenantStore, dense: TieredDenseIndex,
                 lexical: LuceneIndex, *, audit: AuditLog | None = None, dense_snapshot_seq: int = 0,
                 load_s: float = 0.0) -> None:
        self.tenant_id = tenant_id
        self.directory = directory
        self.store = store
        self.dense = dense
        self.touches = TouchBuffer()          # accesses not yet committed (the periodic flush commits them)
        self.audit = audit if audit is not None else AuditPolicy().open(directory)
        self._in_flight = 0                   # searches holding the shard (event loop only)
        self._drain_waiters: list[asyncio.Future[None]] = []
        # Idempotent calls in flight by (kind, key), each settled when its call ends (event loop only): a
        # second call with the same key waits for the first (server/engine/idempotent.py).
        self.calls_in_flight: dict[tuple[str, str], asyncio.Future[Any]] = {}
        self._dropped = False
        self._build: Future[None] | None = None   # the last dense build and its snapshot (see _after_build)
        self._lexical = LexicalSlot(tenant_id, directory, lexical)
        self.write_lock = threading.Lock()   # one writer per tenant; searches never take it
        self._snapshot_lock = threading.Lock()
        self._dense_snapshot_seq = dense_snapshot_seq
        self._dense_changes = 0              # adds/removes since load; touches and status updates are not
        self._dense_snapshot_changes: tuple[int, int] = (0, 0)
        self._store_bytes = sum(len(m.content) + MEMORY_BYTES for m in store.all())
        self.last_used_s = time.monotonic()
        self.load_s = load_s
        self.closed = False
        self.compacting = False

    @classmethod
    def load(cls, tenant_id: str, directory: Path, *, dim: int, rules: TierRules | None = None,
             builder: Executor | None = None, flat_factory: Callable[[int], VectorIndex] = FlatDenseIndex,
             audit: AuditPolicy | None = None, open_log: LogOpener | None = None) -> TenantShard:
        """``open_log``: the tenant's log opener (TenantStore.open's; e.g. ObjectLogBackend.opener), default the
        local file."""
        started = time.perf_counter()
        rules = rules or TierRules()
        store, replayed = TenantStore.open(directory, dim=dim, open_log=open_log)
        restore_artefacts(directory, store)
        dense, snap_seq = load_dense(directory, store, replayed, dim=dim, rules=rules, builder=builder,
                                     flat_factory=flat_factory)
        replayed.vectors = {}   # the indexes hold them now
        lexical = load_lexical(tenant_id, directory, store, replayed)
        load_s = time.perf_counter() - started
        log.info("tenant %s loaded: %d memories, dense %s, in %.3fs", tenant_id, len(store),
                 dense.description, load_s)
        shard = cls(tenant_id, directory, store, dense, lexical,
                    audit=(audit or AuditPolicy()).open(directory, log=store.durable_log),
                    dense_snapshot_seq=snap_seq, load_s=load_s)
        shard._after_build(dense.maybe_promote())
        return shard

    def _after_build(self, build: Future[bool] | None) -> None:
        """A dense build this shard started: once it swaps a new index in, the shard snapshots it.
        :meth:`wait_built` waits for both."""
        if build is None:
            return
        settled: Future[None] = Future()
        self._build = settled

        def snapshot(f: Future[bool]) -> None:
            try:
                if not f.cancelled() and f.exception() is None and f.result():
                    self.save_dense_snapshot()
            finally:
                settled.set_result(None)

        build.add_done_callback(snapshot)

    @property
    def building(self) -> bool:
        """A dense build (or the snapshot after it) is running."""
        return self._build is not None and not self._build.done()

    def wait_built(self, timeout_s: float | None = None) -> None:
        """Blocks until a dense build this shard started, and its snapshot, are done (re-raises the build's
        error)."""
        settled = self._build
        if settled is not None:
            settled.result(timeout_s)
        self.dense.wait_built(timeout_s)

    # -- state and use (the event loop counts searches; the rest may run anywhere) ---------------------
    @property
    def state(self) -> ShardState:
        if self._dropped:
            return ShardState.DROPPED
        if self.closed:
            return ShardState.CLOSED
        return ShardState.BUILDING if self.building else ShardState.LOADED

    def check_live(self) -> None:
        """NotFound once the tenant was dropped (a request that reached the shard before the drop)."""
        if self._dropped:
            raise NotFound(f"tenant {self.tenant_id!r} does not exist")

    def enter(self) -> None:
        """A search starts holding the shard (a drop waits for it; eviction skips the shard meanwhile)."""
        self.check_live()
        self._in_flight += 1

    def leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            for waiter in self._drain_waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._drain_waiters.clear()

    async def drained(self) -> None:
        """Returns once no search holds the shard (after :meth:`mark_dropped`)."""
        if self._in_flight > 0:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def evictable(self) -> bool:
        """Whether the registry may close the shard now: nothing in flight (searches, idempotent calls: a
        reloaded shard would not know a keyed call still running here), building or compacting."""
        return (self._in_flight == 0 and not self.calls_in_flight and not self.building and not self.compacting
                and not self._dropped)

    def mark_dropped(self) -> None:
        with self.write_lock:   # no write is half-way through when the flag flips
            self._dropped = True

    # -- accesses and the audit log -------------------------------------------------------------------
    def view(self, memory: Memory, *, now_ms: int) -> Memory:
        """A memory as a client should see it: pending touches applied, a passed expiry shown as EXPIRED
        (and queued to be persisted by the next flush)."""
        memory = self.touches.overlay(memory)
        if is_expired(memory, now_ms):
            self.touches.expired([memory.memory_id])
            memory = dataclasses.replace(memory, status=MemoryStatus.EXPIRED)
        return memory

    def record_uses(self, memory_ids: Iterable[str], *, now_ms: int) -> None:
        self.touches.record(memory_ids, now_ms=now_ms)

    def log_audit(self, op: AuditOp, refs: Sequence[AuditRef], *, at_ms: int, key_id: str = "", query: str = "",
                  note: str = "") -> None:
        """One audit line (none for a change that named no memory; a search always has one)."""
        if refs or op == AuditOp.SEARCH:
            self.audit.append(op, refs, at_ms=at_ms, key_id=key_id, query=query, note=note)

    def flush_touches(self, *, now_ms: int | None = None) -> int:
        """Commits pending accesses (one compact log record) and found expiries (full updates) as of
        ``now_ms`` (default: the wall clock)."""
        with self.write_lock:
            if self._dropped or self.closed or not len(self.touches):
                return 0
            now = int(time.time() * 1000) if now_ms is None else now_ms
            updates, expired = self.touches.drain(self.store.get, now_ms=now)
            if updates:
                expired_ids = {m.memory_id for m in expired}
                self.apply(updates=[m for m in updates if m.memory_id in expired_ids],
                           accesses=[m for m in updates if m.memory_id not in expired_ids])
            self.log_audit(AuditOp.EXPIRE, refs_of(expired), at_ms=now)
            return len(updates)

    # -- changes ----------------------------------------------------------------------------------------
    def apply(self, *, puts: Sequence[tuple[Memory, np.ndarray]] = (), updates: Sequence[Memory] = (),
              deletes: Sequence[str] = (), accesses: Sequence[Memory] = (), done: Done | None = None,
              marks: list[tuple[str, int, int]] | None = None) -> int:
        """Durably commits a change, then makes it visible to dense and lexical search. ``done``: the answer
        of the idempotent call the change is, logged in the same group (``TenantStore.commit``); ``marks``: gets
        the log's and the indexes' (stage, start_ns, end_ns) (traced writes, server/tracing.py). Caller holds
        ``write_lock``."""
        doomed = [m.doc_id for m in (self.store.get(i) for i in deletes) if m is not None]
        wal_ns = time.monotonic_ns() if marks is not None else 0
        seq = self.store.commit(puts=puts, updates=updates, deletes=deletes, accesses=accesses, done=done)
        index_ns = time.monotonic_ns() if marks is not None else 0
        if puts:
            # each put's vector, or its main vector and passage vectors as rows (server/index/memory_vectors.py)
            self._after_build(self.dense.add([m.doc_id for m, _ in puts], [v for _, v in puts]))
            self._store_bytes += sum(len(m.content) + MEMORY_BYTES for m, _ in puts)
        if doomed:
            self.dense.remove(doomed)
            self._store_bytes -= len(doomed) * MEMORY_BYTES
        if puts or doomed:
            self._dense_changes += 1
            self._lexical.write([m for m, _ in puts], doomed)
        if marks is not None:
            marks += [("wal", wal_ns, index_ns), ("index", index_ns, time.monotonic_ns())]
        return seq

    # -- the lexical index (server/tenants/lexical_slot.py) ------------------------------------------------
    @property
    def lexical(self) -> LuceneIndex:
        """The tenant's Lucene index for a search: once every Write acknowledged before is visible in it (Lucene
        refreshes behind the acknowledgement, LexicalSlot.searchable; a search waits briefly while a repair swaps
        it)."""
        return self._lexical.searchable()

    def write_coming(self) -> AbstractContextManager[None]:
        """Around a Write from its validation to its commit: Lucene's refresher waits for it (LexicalSlot.coming)."""
        return self._lexical.coming()

    @property
    def lexical_stale(self) -> bool:
        """A lexical write met a full disk: searches use its last state until a repair rebuilds it."""
        return self._lexical.stale

    @lexical_stale.setter
    def lexical_stale(self, stale: bool) -> None:
        self._lexical.stale = stale

    def lexical_rebuild_bytes(self) -> int:
        return LexicalSlot.rebuild_bytes(len(self.store))

    def repair_due(self) -> bool:
        return not self.closed and self._lexical.repair_due()

    def repair_lexical(self) -> bool:
        """Rebuilds a stale lexical index from the store, under the write lock (see LexicalSlot.repair)."""
        with self.write_lock:
            if self.closed or not self._lexical.repair(self.store.all(), self.store.seq):
                return False
        log.warning("tenant %s: lexical index rebuilt from the store (%d memories)", self.tenant_id, len(self.store))
        return True

    def touch(self) -> None:
        self.last_used_s = time.monotonic()

    def flush(self, *, periodic: bool = False) -> None:
        """The flush: pending touches committed (a full disk drops this interval's access counts, a ranking
        signal, and nothing else), the audit log fsynced and its retention applied, Lucene committed up to the
        store's seq (``periodic``: only when its documents changed, see LexicalSlot.commit)."""
        try:
            self.flush_touches()
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            log.warning("tenant %s: no space to flush access counts", self.tenant_id)
        self.audit.sync()
        self.audit.maintain()   # retention: a listdir and a stat per segment
        with self.write_lock:
            self._commit_lexical_locked(force=not periodic)

    def _commit_lexical_locked(self, *, force: bool = True) -> bool:
        """Commits Lucene at the store's seq; False when it could not (closed, stale, or the disk is full)."""
        return not self.closed and self._lexical.commit(self.store.seq, force=force)

    def compact(self) -> int | None:
        """Compacts the store's log in the background (a compaction thread): Lucene is committed at the
        store's seq and the state taken under the write lock, for an instant; the new log is written
        while writes and searches go on. The Lucene commit first means no restart ever needs a record
        the compacted log dropped. Returns the new size, or None when it did not run."""
        with self.write_lock:
            if not self._commit_lexical_locked():
                return None
            plan = self.store.begin_compaction()
            if plan is None:
                return None
            self.compacting = True
            # Where the base lives in object storage, the IVF index rides beside it (a new owner with an empty
            # disk loads it instead of training one); taken at the plan's seq, like the base.
            artefacts = self._dense_artefact_locked() if self.store.stores_artefacts else {}
        try:
            before = plan.upto
            started = time.perf_counter()
            size = self.store.run_compaction(plan, artefacts=artefacts)
        finally:
            self.compacting = False
        log.info("tenant %s: log compacted %d -> %d bytes (%d memories) in %.2fs", self.tenant_id, before, size,
                 len(plan.live), time.perf_counter() - started)
        return size

    def _dense_snapshot_locked(self) -> tuple[dict[str, Any], Any] | None:
        """(header, payload) of the dense snapshot at the store's seq, when the index is IVF (a flat one is
        rebuilt from the logged vectors as fast as it loads); None otherwise. Caller holds ``write_lock``."""
        active = self.dense.active
        if active.tier != "ivf" or self.closed:
            return None
        header = {"seq": self.store.seq, "dim": self.dense.dim, "n": len(active), "built_n": self.dense.built_n,
                  "description": active.description}
        return header, ivf_payload(active)  # type: ignore[arg-type]

    def _dense_artefact_locked(self) -> dict[str, bytes]:
        """The dense snapshot as a compaction's artefact (bytes by name); {} when there is none."""
        snap = self._dense_snapshot_locked()
        return {DENSE_SNAPSHOT: snapshot_bytes(*snap)} if snap is not None else {}

    def save_dense_snapshot(self) -> bool:
        """Writes ``dense.snap`` when the dense index is IVF and its vectors changed since the last snapshot
        (or it was swapped in). Updates that change no vector (access counts, statuses) do not count: the
        load-time catch-up replays only vector changes after the snapshot's seq."""
        with self._snapshot_lock:
            with self.write_lock:   # no write between reading the seq and serialising the index
                changes = (self._dense_changes, self.dense.builds)
                if self._dense_snapshot_seq and changes == self._dense_snapshot_changes:
                    return False
                snap = self._dense_snapshot_locked()
                if snap is None:
                    return False
                header, payload = snap
                seq = header["seq"]
            started = time.perf_counter()
            try:
                size = write_snapshot(self.directory / DENSE_SNAPSHOT, header, payload)
            except OSError as exc:
                if not is_storage_full(exc):
                    raise
                (self.directory / (DENSE_SNAPSHOT + ".tmp")).unlink(missing_ok=True)
                log.warning("tenant %s: no space for the dense snapshot; the next load rebuilds it", self.tenant_id)
                return False
            self._dense_snapshot_seq = seq
            self._dense_snapshot_changes = changes
        log.info("tenant %s: dense snapshot at seq %d (%d vectors, %d bytes) in %.2fs", self.tenant_id, seq,
                 header["n"], size, time.perf_counter() - started)
        return True

    def close(self) -> None:
        """Commits pending touches, flushes Lucene, snapshots an IVF index, closes everything (the audit log
        too). The shard is unusable after."""
        self.dense.close()
        self.flush()
        self.save_dense_snapshot()
        with self.write_lock:
            self.closed = True
        self.audit.close()
        self._lexical.close()
        self.store.close()

    def abandon(self) -> None:
        """Closes a deposed copy (another owner took its log) without committing anything: its pending
        access touches are dropped (the log would refuse them), no Lucene commit, no dense snapshot (its
        local files are caches of a log that moved on). The shard is unusable after."""
        self.dense.close()
        with self.write_lock:
            self.closed = True
            self.touches = TouchBuffer()
        self.audit.close()
        self._lexical.close()
        self.store.close()

    # -- purges -------------------------------------------------------------------------------------------
    def purge_locked(self, memory_ids: Sequence[str], *, key_id: str, now_ms: int, compact: bool,
                     note: str = "", done: Done | None = None) -> int:
        """Deletes memories from the store, FAISS and Lucene in one log group, and strips them from the
        supersede links of the memories that remain (so History never names them). With ``compact``, the
        Lucene commit and the log rewrite follow, so nothing of them stays on disk in the store. Caller
        holds ``write_lock``."""
        get = self.store.get
        doomed = {i: m for i in dict.fromkeys(memory_ids) if (m := get(i)) is not None}
        if not doomed:
            if done is not None:
                self.apply(done=done)
            return 0
        relinked: dict[str, Memory] = {}
        for m in doomed.values():
            for other_id in (*m.supersedes, m.superseded_by):
                other = relinked.get(other_id) or get(other_id) if other_id else None
                if other is None or other.memory_id in doomed:
                    continue
                relinked[other.memory_id] = dataclasses.replace(
                    other, supersedes=tuple(s for s in other.supersedes if s not in doomed),
                    superseded_by="" if other.superseded_by in doomed else other.superseded_by)
        self.apply(updates=list(relinked.values()), deletes=list(doomed), done=done)
        self.log_audit(AuditOp.DELETE, refs_of(list(doomed.values())), at_ms=now_ms, key_id=key_id, note=note)
        if compact:
            # Through the slot: a stale index (its writes skipped) is never committed as current. Where the
            # commit fails the log is compacted all the same (the forget) and the next load rebuilds Lucene.
            self._commit_lexical_locked()
            size = self.store.compact()
            log.info("tenant %s: purged %d memories; log compacted to %d bytes", self.tenant_id, len(doomed), size)
        return len(doomed)

    def ram_bytes(self) -> int:
        return SHARD_FIXED_BYTES + self.dense.ram_bytes() + self._store_bytes + self.store.idempotency.ram_bytes()

    def stats(self) -> dict[str, object]:
        return {"tenant_id": self.tenant_id, "state": self.state.value,
                "memories": len(self.store), "dense_tier": self.dense.tier, "dense_index": self.dense.description,
                "ram_bytes": self.ram_bytes(), "idle_s": time.monotonic() - self.last_used_s,
                "load_ms": self.load_s * 1000.0, "seq": self.store.seq, "log_bytes": self.store.log_bytes,
                "live_bytes": self.store.live_bytes_estimate, "compactions": self.store.compactions,
                "lexical_stale": self.lexical_stale}
