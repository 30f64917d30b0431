"""One tenant's data: its store, dense index and Lucene index, loaded together, changed together.

A shard only sees its own tenant's directory; there is no object that spans tenants. The dense index
is tiered (flat → IVF-HNSW, see ``server/index/tiered.py``); an IVF index is snapshotted to
``dense.snap`` after each promotion and when the shard closes, so a restart or a reload after eviction
does not re-train. A missing, corrupt or stale snapshot is rebuilt from the vectors in the store.

A full disk: a commit that cannot reach the log changes nothing (the store raises before applying). Lucene
closes its IndexWriter when a flush meets ENOSPC, so a lexical failure after a durable commit marks the
lexical index stale (searches keep the last reader; the write stays acknowledged: it is in the log, the
store and the dense index) and :meth:`TenantShard.repair_lexical` rebuilds it from the store once space
returns: the registry tries only when the disk has room for the rebuilt index (``lexical_rebuild_bytes``),
and after a rebuild that met a full disk again, not before a backoff (1 s doubling to a minute). A rebuild
holds the write lock; retried every flush interval on a disk that stayed full, it starved writes (found by
the tmpfs test: ten failed rebuilds in five seconds). A dense snapshot that cannot be written is skipped (it
is an optimisation of the next load).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path

import numpy as np

from server.domain import Memory
from server.errors import is_storage_full
from server.index.ivf import ivf_from_payload, ivf_payload
from server.index.dense import FlatDenseIndex
from server.index.tiered import TieredDenseIndex, VectorIndex
from server.index.tiers import TierRules
from server.lexical.lucene import LuceneIndex
from server.store.memory_store import Replayed, TenantStore
from server.store.snapshot import read_snapshot, write_snapshot
from server.store.wal import read_records
from server.text import memory_text

log = logging.getLogger(__name__)

DENSE_SNAPSHOT = "dense.snap"
WAL_NAME = "memories.wal"           # the store's log (TenantStore.open)
SHARD_FIXED_BYTES = 512 * 1024      # measured: an open Lucene index ~50 KiB heap, ~300 KiB RSS, 1 fd (+1 WAL fd)
MEMORY_BYTES = 700                  # a Memory object, its ids and its map entries, beside its content
LEXICAL_BYTES_PER_MEMORY = 400      # a rebuilt Lucene index on disk, conservative (thresholds.py's short texts: 38)
REPAIR_BACKOFF_S = (1.0, 60.0)      # after a rebuild that met a full disk: first wait, longest wait
LEXICAL_SWAP_WAIT_S = 30.0          # a search waits at most this for a repair's swap (measured: tens of ms)


class TenantShard:
    def __init__(self, tenant_id: str, directory: Path, store: TenantStore, dense: TieredDenseIndex,
                 lexical: LuceneIndex, *, dense_snapshot_seq: int = 0, load_s: float = 0.0) -> None:
        self.tenant_id = tenant_id
        self.directory = directory
        self.store = store
        self.dense = dense
        self._lexical = lexical
        self._lexical_ready = threading.Event()   # cleared while a repair swaps the index (see ``lexical``)
        self._lexical_ready.set()
        self.write_lock = threading.Lock()   # one writer per tenant; searches never take it
        self._lexical_seq = lexical.committed_seq()
        self._snapshot_lock = threading.Lock()
        self._dense_snapshot_seq = dense_snapshot_seq
        self._dense_changes = 0              # adds/removes since load; touches and status updates are not
        self._dense_snapshot_changes: tuple[int, int] = (0, 0)
        self._store_bytes = sum(len(m.content) + MEMORY_BYTES for m in store.all())
        self.last_used_s = time.monotonic()
        self.load_s = load_s
        self.closed = False
        self.lexical_stale = False           # a lexical write met a full disk: rebuild once space returns
        self._repair_failures = 0
        self._repair_after_s = 0.0           # monotonic: no rebuild before (a backoff after a failed one)
        self.compacting = False

    @classmethod
    def load(cls, tenant_id: str, directory: Path, *, dim: int, rules: TierRules | None = None,
             builder: Executor | None = None, flat_factory: Callable[[int], VectorIndex] = FlatDenseIndex,
             ) -> TenantShard:
        started = time.perf_counter()
        rules = rules or TierRules()
        store, replayed = TenantStore.open(directory, dim=dim)
        dense, snap_seq = _load_dense(directory, store, replayed, dim=dim, rules=rules, builder=builder,
                                      flat_factory=flat_factory)
        replayed.vectors = {}   # the indexes hold them now
        lexical = LuceneIndex.open(directory / "lucene")
        committed = lexical.committed_seq()
        if committed > store.seq:
            # The index claims changes the log does not hold: rebuild it from the store.
            log.warning("tenant %s: lexical index ahead of the log (%d > %d); rebuilding",
                        tenant_id, committed, store.seq)
            lexical.delete_all()
            committed = 0
            live = store.all()
            lexical.upsert([(m.doc_id, memory_text(m)) for m in live])
        else:
            _replay_lexical(lexical, [op for op in replayed.lexical_ops if op[0] > committed])
        lexical.refresh()
        lexical.commit(store.seq)
        load_s = time.perf_counter() - started
        log.info("tenant %s loaded: %d memories, dense %s, in %.3fs", tenant_id, len(store),
                 dense.description, load_s)
        shard = cls(tenant_id, directory, store, dense, lexical, dense_snapshot_seq=snap_seq, load_s=load_s)
        dense.set_on_swap(lambda _index: shard.save_dense_snapshot())
        dense.set_exact_source(shard.logged_vectors)
        dense.maybe_promote()
        return shard

    def apply(self, *, puts: Sequence[tuple[Memory, np.ndarray]] = (), updates: Sequence[Memory] = (),
              deletes: Sequence[str] = (), accesses: Sequence[Memory] = ()) -> int:
        """Durably commits a change, then makes it visible to dense and lexical search. Caller holds
        ``write_lock``."""
        doomed = [m.doc_id for m in (self.store.get(i) for i in deletes) if m is not None]
        seq = self.store.commit(puts=puts, updates=updates, deletes=deletes, accesses=accesses)
        if puts:
            self.dense.add([m.doc_id for m, _ in puts], np.stack([v for _, v in puts]))
            self._store_bytes += sum(len(m.content) + MEMORY_BYTES for m, _ in puts)
        if doomed:
            self.dense.remove(doomed)
            self._store_bytes -= len(doomed) * MEMORY_BYTES
        if puts or doomed:
            self._dense_changes += 1
            self._lexical_write(puts, doomed)
        return seq

    @property
    def lexical(self) -> LuceneIndex:
        """The tenant's Lucene index. While a repair swaps it (the stale one closed, the new one not yet open)
        a search waits here, briefly, instead of meeting a closed index (LexicalIndexClosedError)."""
        self._lexical_ready.wait(LEXICAL_SWAP_WAIT_S)
        return self._lexical

    @lexical.setter
    def lexical(self, index: LuceneIndex) -> None:
        self._lexical = index

    def _lexical_write(self, puts: Sequence[tuple[Memory, np.ndarray]], doomed: Sequence[int]) -> None:
        if self.lexical_stale:
            return   # the rebuild reads the store: nothing is lost by skipping
        try:
            if puts:
                self.lexical.upsert([(m.doc_id, memory_text(m)) for m, _ in puts], refresh=False)
            if doomed:
                self.lexical.delete(doomed, refresh=False)
            self.lexical.refresh()
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            self._lexical_lost(exc)

    def _lexical_lost(self, exc: BaseException) -> None:
        self.lexical_stale = True
        log.warning("tenant %s: the lexical index met a full disk (%s); it is rebuilt from the store once space "
                    "returns (searches use its last state meanwhile)", self.tenant_id, str(exc).splitlines()[0][:200])

    def lexical_rebuild_bytes(self) -> int:
        """About the disk a rebuild of the lexical index writes (its new segments, beside the last commit's)."""
        return (1 << 20) + LEXICAL_BYTES_PER_MEMORY * len(self.store)

    def repair_due(self) -> bool:
        return self.lexical_stale and not self.closed and time.monotonic() >= self._repair_after_s

    def repair_lexical(self) -> bool:
        """Rebuilds a stale lexical index from the store. The IndexWriter Lucene closed on ENOSPC keeps the
        directory's write lock, so the old index closes first (waiting for the searches that hold its
        reader) and the fresh one, opened at the last commit, is swapped in at once (searches read that
        commit meanwhile), then rebuilt. On another full disk it stays stale and the next try waits a
        backoff (see the module docstring)."""
        with self.write_lock:
            if not self.lexical_stale or self.closed:
                return False
            self._lexical_ready.clear()
            try:
                try:
                    self._lexical.close()
                except Exception as exc:  # noqa: BLE001 - its writer is already closed; nothing of it is needed
                    log.info("tenant %s: closing the stale lexical index failed (%s)", self.tenant_id,
                             str(exc).splitlines()[0][:200])
                self._lexical = LuceneIndex.open(self.directory / "lucene")
            finally:
                self._lexical_ready.set()
            try:
                self.lexical.delete_all(refresh=False)
                self.lexical.upsert([(m.doc_id, memory_text(m)) for m in self.store.all()], refresh=False)
                self.lexical.refresh()
                self.lexical.commit(self.store.seq)
            except Exception as exc:
                if not is_storage_full(exc):
                    raise
                wait_s = min(REPAIR_BACKOFF_S[1], REPAIR_BACKOFF_S[0] * 2 ** self._repair_failures)
                self._repair_failures += 1
                self._repair_after_s = time.monotonic() + wait_s
                log.warning("tenant %s: the lexical rebuild met a full disk again; next try in %.0fs",
                            self.tenant_id, wait_s)
                return False
            self._lexical_seq = self.store.seq
            self.lexical_stale = False
            self._repair_failures, self._repair_after_s = 0, 0.0
        log.warning("tenant %s: lexical index rebuilt from the store (%d memories)", self.tenant_id, len(self.store))
        return True

    def logged_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Exact vectors of the live memories, read back from the log (a rebuild of an SQ8/PQ index must
        not train on decoded vectors). Runs on the build thread; the WAL may grow meanwhile."""
        blobs: dict[int, bytes] = {}
        for meta, blob in read_records(self.directory / WAL_NAME):
            if meta.get("op") == "put" and blob:
                blobs[int(meta["m"]["doc"])] = blob
        live = [doc for doc in blobs if self.store.by_doc(doc) is not None]
        ids = np.asarray(live, dtype=np.int64)
        vectors = np.frombuffer(b"".join(blobs[d] for d in live), dtype=np.float32).reshape(len(live), self.dense.dim)
        return ids, vectors

    def touch(self) -> None:
        self.last_used_s = time.monotonic()

    def flush(self) -> None:
        """Commits the Lucene index up to the store's sequence number (cheap when nothing changed)."""
        with self.write_lock:
            self._commit_lexical_locked()

    def _commit_lexical_locked(self) -> bool:
        """Commits Lucene at the store's seq; False when it could not (stale, or the disk is full)."""
        if self.closed or self.lexical_stale:
            return False
        if self._lexical_seq != self.store.seq:
            try:
                self.lexical.commit(self.store.seq)
            except Exception as exc:
                if not is_storage_full(exc):
                    raise
                self._lexical_lost(exc)
                return False
            self._lexical_seq = self.store.seq
        return True

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
        try:
            before = plan.upto
            started = time.perf_counter()
            size = self.store.run_compaction(plan)
        finally:
            self.compacting = False
        log.info("tenant %s: log compacted %d -> %d bytes (%d memories) in %.2fs", self.tenant_id, before, size,
                 len(plan.live), time.perf_counter() - started)
        return size

    def save_dense_snapshot(self) -> bool:
        """Writes ``dense.snap`` when the dense index is IVF and its vectors changed since the last snapshot
        (or it was swapped in). Updates that change no vector (access counts, statuses) do not count: the
        load-time catch-up replays only vector changes after the snapshot's seq."""
        with self._snapshot_lock:
            with self.write_lock:   # no write between reading the seq and serialising the index
                active = self.dense.active
                seq = self.store.seq
                changes = (self._dense_changes, self.dense.builds)
                if active.tier != "ivf" or self.closed or (
                        self._dense_snapshot_seq and changes == self._dense_snapshot_changes):
                    return False
                payload = ivf_payload(active)  # type: ignore[arg-type]
                header = {"seq": seq, "dim": self.dense.dim, "n": len(active), "built_n": self.dense.built_n,
                          "description": active.description}
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
        """Flushes Lucene, snapshots an IVF index, closes everything. The shard is unusable after."""
        self.dense.close()
        self.flush()
        self.save_dense_snapshot()
        with self.write_lock:
            self.closed = True
        try:
            self.lexical.close()
        except Exception:
            if not self.lexical_stale:
                raise
        self.store.close()

    def ram_bytes(self) -> int:
        return SHARD_FIXED_BYTES + self.dense.ram_bytes() + self._store_bytes

    def stats(self) -> dict[str, object]:
        return {"tenant_id": self.tenant_id, "state": "BUILDING" if self.dense.building else "LOADED",
                "memories": len(self.store), "dense_tier": self.dense.tier, "dense_index": self.dense.description,
                "ram_bytes": self.ram_bytes(), "idle_s": time.monotonic() - self.last_used_s,
                "load_ms": self.load_s * 1000.0, "seq": self.store.seq, "log_bytes": self.store.log_bytes,
                "live_bytes": self.store.live_bytes_estimate, "compactions": self.store.compactions,
                "lexical_stale": self.lexical_stale}


def _load_dense(directory: Path, store: TenantStore, replayed: Replayed, *, dim: int, rules: TierRules,
                builder: Executor | None, flat_factory: Callable[[int], VectorIndex],
                ) -> tuple[TieredDenseIndex, int]:
    """The IVF snapshot caught up with the log when usable; otherwise a flat index of the logged vectors."""
    snap = read_snapshot(directory / DENSE_SNAPSHOT)
    if snap is not None:
        header, payload = snap
        seq = int(header.get("seq", -1))
        if header.get("dim") == dim and 0 <= seq <= store.seq:
            try:
                ivf = ivf_from_payload(payload, dim=dim, rules=rules, description=str(header.get("description", "")))
            except (RuntimeError, ValueError) as exc:
                log.warning("tenant dir %s: dense snapshot unreadable (%s); rebuilding", directory.name, exc)
            else:
                del payload
                replayed_changes = _catch_up(ivf, replayed, after_seq=seq)
                if len(ivf) == len(replayed.vectors):
                    index = TieredDenseIndex(dim, rules=rules, builder=builder, initial=ivf,
                                             built_n=int(header.get("built_n", len(ivf))))
                    return index, 0 if replayed_changes else seq   # 0: snapshot again on close
                log.warning("tenant dir %s: dense snapshot holds %d vectors, the store %d; rebuilding",
                            directory.name, len(ivf), len(replayed.vectors))
        else:
            log.warning("tenant dir %s: dense snapshot is stale (seq %d, store %d, dim %s); rebuilding",
                        directory.name, seq, store.seq, header.get("dim"))
    index = TieredDenseIndex(dim, rules=rules, builder=builder, flat_factory=flat_factory)
    if replayed.vectors:
        ids = np.fromiter(replayed.vectors.keys(), dtype=np.int64, count=len(replayed.vectors))
        index.active.add(ids, np.stack(list(replayed.vectors.values())))
    return index, 0


def _catch_up(index: object, replayed: Replayed, *, after_seq: int) -> int:
    """Applies the log's vector changes after ``after_seq``: docs put since are (re)added, docs deleted
    since are removed. Removing first makes a re-add (content change) never duplicate an id."""
    touched = {doc for seq, _, doc, _ in replayed.lexical_ops if seq > after_seq}
    if not touched:
        return 0
    ids = np.fromiter(touched, dtype=np.int64, count=len(touched))
    index.remove(ids)  # type: ignore[attr-defined]
    live = [d for d in touched if d in replayed.vectors]
    if live:
        index.add(np.asarray(live, dtype=np.int64), np.stack([replayed.vectors[d] for d in live]))  # type: ignore[attr-defined]
    return len(touched)


def _replay_lexical(lexical: LuceneIndex, ops: list[tuple[int, str, int, str]]) -> None:
    batch: list[tuple[int, str]] = []
    for _, op, doc_id, text in ops:
        if op == "put":
            batch.append((doc_id, text))
            continue
        if batch:
            lexical.upsert(batch)
            batch = []
        lexical.delete([doc_id])
    if batch:
        lexical.upsert(batch)
