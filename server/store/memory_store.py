"""The durable store of one tenant's memories: in-memory state rebuilt from its write-ahead log.

Every change is one ``commit`` (a group of puts, updates and deletes) that is fsynced to the log before
the in-memory state changes, so what readers see is always durable. Vectors live in the log beside
their memory, so indexes are rebuilt on load without re-embedding: a put's blob holds the memory's main vector and,
for a long memory, its passage vectors after it (server/index/memory_vectors.py); replay and compaction carry them
as they were written, never re-embedding.

Compaction rewrites the log as one put per live memory (access counts and the latest version folded
in): :meth:`TenantStore.begin_compaction` takes the state at the log's current end (the caller holds the
shard's write lock for that instant only), :meth:`TenantStore.run_compaction` writes the new log beside
the old one while commits go on, then appends what was committed meanwhile and swaps it in atomically
(:meth:`WriteAheadLog.publish`). ``live_bytes_estimate`` (what a compacted log would hold) against
``log_bytes`` tells when one is worth it. The answers of idempotent calls still inside their window
(:mod:`server.store.idempotency`) are records of the same log: replay rebuilds them, compaction keeps them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from server.domain import Memory
from server.index.memory_vectors import expand, rows_of
from server.store.codec import memory_from_json, memory_to_json
from server.store.columns import Columns, DocColumns
from server.store.durable_log import LogOpener, TenantLog
from server.store.idempotency import OP as IDEMPOTENT_OP
from server.store.idempotency import Done, IdempotencyTable
from server.store.wal import Record, WriteAheadLog
from server.text import memory_text

log = logging.getLogger(__name__)


LOG_FILE = "memories.wal"   # the store's log, in the tenant's directory
BASE_OP = "base"            # a compacted log's first record: the seq its base stands for (TenantStore.base_seq)
_RECORD_FIXED_BYTES = 370   # header, JSON keys and fixed fields of a put (measured: 343 with 6-digit times, ~370 with ms times)


@dataclass(frozen=True)
class CompactionPlan:
    upto: int                  # the log's end when the state was taken
    live: list[Memory]
    seq: int
    answered: list[Done] = field(default_factory=list)   # the idempotency entries still in their window


@dataclass
class Replayed:
    """What a load hands to the indexes: live vectors and the lexical changes in log order."""

    vectors: dict[int, np.ndarray] = field(default_factory=dict)    # doc id -> main vector (dim,)
    passages: dict[int, np.ndarray] = field(default_factory=dict)   # doc id -> its passage vectors (k, dim), k >= 1
    lexical_ops: list[tuple[int, str, int, str]] = field(default_factory=list)  # (seq, op, doc_id, text)


class TenantStore:
    def __init__(self, directory: Path, wal: TenantLog, *, dim: int) -> None:
        self.directory = directory
        self.dim = dim
        self._wal = wal
        self._lock = threading.RLock()
        self._by_id: dict[str, Memory] = {}
        self._by_doc: dict[int, str] = {}
        self._slots: dict[tuple[str, str], set[str]] = {}   # (key, scope) → memory ids holding that key
        self._next_doc_id = 1
        self._columns = DocColumns()
        self.idempotency = IdempotencyTable()   # answered calls by idempotency key (server/store/idempotency.py)
        self.seq = 0
        self.base_seq = 0   # the seq of the compacted base the log starts from: no record before it is kept
        self._compact_lock = threading.Lock()   # one compaction at a time; close waits for it
        self._live_bytes = 0
        self._passage_rows: dict[int, int] = {}   # doc id -> passage vectors its put carries (long memories only)
        self.compactions = 0
        self.closed = False

    @classmethod
    def open(cls, directory: Path, *, dim: int, open_log: LogOpener | None = None) -> tuple[TenantStore, Replayed]:
        """Replays the tenant's log: the local file by default, or the one ``open_log`` opens (a
        :data:`server.store.durable_log.LogOpener`, e.g. ``ObjectLogBackend.opener(tenant_id)``)."""
        replayed = Replayed()
        store = cls(directory, None, dim=dim)   # type: ignore[arg-type]  # its log is set once it is open
        n_records = 0

        def apply(meta: dict, blob: bytes) -> None:
            nonlocal n_records
            n_records += 1
            store._apply(meta, blob, replayed)

        if open_log is None:   # the local file: each record applied as it is read, no list of the whole log
            store._wal, _ = WriteAheadLog.open(directory / LOG_FILE, each=apply)
        else:
            store._wal, records = open_log(directory)
            for meta, blob in records:
                apply(meta, blob)
        log.info("tenant store %s: %d memories from %d log records", directory.name, len(store._by_id), n_records)
        return store, replayed

    @property
    def stores_artefacts(self) -> bool:
        """Whether a compaction keeps index snapshots beside its base (TenantLog.stores_artefacts)."""
        return self._wal.stores_artefacts

    def take_artefacts(self) -> dict[str, bytes]:
        """The index snapshots the replayed base carried (once); {} for a local log."""
        return self._wal.take_artefacts()

    @property
    def durable_log(self) -> TenantLog:
        """The log this store writes through (its audit log opens beside it: AuditPolicy.open)."""
        return self._wal

    @property
    def needs_reload(self) -> bool:
        """The log refuses appends until it is reopened (TenantLog.needs_reload)."""
        return self._wal.needs_reload

    @property
    def compacted_seq(self) -> int:
        """The seq below which the log kept no history (TenantLog.compacted_seq); index caches older are stale."""
        return self._wal.compacted_seq

    @property
    def history_from(self) -> int:
        """The seq from which the log holds every change: an index cache committed before it lacks changes no
        replay restores (deletes folded into a base) and must be rebuilt from the store."""
        return max(self.compacted_seq, self.base_seq)

    # -- reads ------------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory | None:
        return self._by_id.get(memory_id)

    def by_doc(self, doc_id: int) -> Memory | None:
        memory_id = self._by_doc.get(doc_id)
        return None if memory_id is None else self._by_id.get(memory_id)

    def columns(self) -> Columns:
        """The filtering and ranking fields of every doc id, as arrays (see :mod:`server.store.columns`)."""
        return self._columns.view()

    def in_slot(self, key: str, scope: str) -> list[Memory]:
        """Every memory (any status) written with this key and scope."""
        with self._lock:
            ids = self._slots.get((key, scope), ())
            return [self._by_id[i] for i in sorted(ids) if i in self._by_id]

    def __len__(self) -> int:
        return len(self._by_id)

    def all(self) -> list[Memory]:
        with self._lock:
            return list(self._by_id.values())

    def allocate_doc_ids(self, n: int) -> list[int]:
        with self._lock:
            start = self._next_doc_id
            self._next_doc_id += n
            return list(range(start, start + n))

    # -- writes -----------------------------------------------------------------------------------
    def commit(self, *, puts: Sequence[tuple[Memory, np.ndarray]] = (), updates: Iterable[Memory] = (),
               deletes: Sequence[str] = (), accesses: Sequence[Memory] = (), done: Done | None = None) -> int:
        """Logs and fsyncs one group of changes, then applies it; returns the group's sequence number.
        ``accesses`` are memories whose access fields alone changed (``last_access_at_ms``,
        ``access_count``, ``importance``): one compact record for all of them, not one per memory.
        ``done``: the answer of the idempotent call this change is, recorded in the same group (so the
        change and its answer are durable together); committed alone when the call changed nothing."""
        with self._lock:
            seq = self.seq + 1
            records: list[Record] = []
            for memory, vector in puts:
                vec = rows_of(vector, self.dim)   # main vector, then passages (one blob: replay keeps them together)
                records.append(({"op": "put", "seq": seq, "m": memory_to_json(memory)}, vec.tobytes()))
            records.extend(({"op": "upd", "seq": seq, "m": memory_to_json(m)}, b"") for m in updates)
            if accesses:
                rows = [[m.memory_id, m.last_access_at_ms, m.access_count, m.importance] for m in accesses]
                records.append(({"op": "acc", "seq": seq, "a": rows}, b""))
            if deletes:
                records.append(({"op": "del", "seq": seq, "ids": list(deletes)}, b""))
            if done is not None:
                records.append((done.record(seq), b""))
            if not records:
                return self.seq
            self._wal.append(records)
            for meta, blob in records:
                self._apply(meta, blob, None)
            return seq

    def _apply(self, meta: dict, blob: bytes, replayed: Replayed | None) -> None:
        op = meta["op"]
        self.seq = max(self.seq, int(meta.get("seq", 0)))
        if op == BASE_OP:
            self.base_seq = max(self.base_seq, int(meta["seq"]))
        elif op in ("put", "upd"):
            memory = memory_from_json(meta["m"])
            old = self._by_id.get(memory.memory_id)
            old_bytes = self._record_bytes(old) if old is not None else 0
            if op == "put":
                rows = len(blob) // (4 * self.dim)
                if rows > 1:
                    self._passage_rows[memory.doc_id] = rows - 1
                else:
                    self._passage_rows.pop(memory.doc_id, None)
            self._live_bytes += self._record_bytes(memory) - old_bytes
            self._columns.set(memory)  # before the maps: a doc that a reader can resolve has its row
            self._by_id[memory.memory_id] = memory
            self._by_doc[memory.doc_id] = memory.memory_id
            self._next_doc_id = max(self._next_doc_id, memory.doc_id + 1)
            if memory.key:
                self._slots.setdefault((memory.key, memory.scope), set()).add(memory.memory_id)
            if replayed is not None:
                if op == "put":
                    rows = np.frombuffer(blob, dtype=np.float32).reshape(-1, self.dim)
                    replayed.vectors[memory.doc_id] = rows[0]
                    if len(rows) > 1:
                        replayed.passages[memory.doc_id] = rows[1:]
                    else:
                        replayed.passages.pop(memory.doc_id, None)
                if op == "put" or (old is not None and memory_text(old) != memory_text(memory)):
                    replayed.lexical_ops.append((self.seq, "put", memory.doc_id, memory_text(memory)))
        elif op == IDEMPOTENT_OP:
            self.idempotency.add(Done.from_record(meta))
        elif op == "acc":
            for memory_id, last_ms, count, importance in meta["a"]:
                old = self._by_id.get(memory_id)
                if old is None:  # deleted in the same group or before: nothing to touch
                    continue
                memory = dataclasses.replace(old, last_access_at_ms=int(last_ms), access_count=int(count),
                                             importance=float(importance))
                self._columns.set(memory)
                self._by_id[memory_id] = memory
        elif op == "del":
            doomed = [m for m in (self._by_id.get(i) for i in meta["ids"]) if m is not None]
            if len(doomed) > 1 and replayed is None:
                # One visibility point for a multi-memory delete (a purge): a concurrent reader sees all of
                # it or none of it. The id map goes first, so a doc found by id resolves to nothing.
                gone_ids = {m.memory_id for m in doomed}
                gone_docs = {m.doc_id for m in doomed}
                self._by_id = {k: v for k, v in self._by_id.items() if k not in gone_ids}
                self._by_doc = {k: v for k, v in self._by_doc.items() if k not in gone_docs}
            for memory in doomed:
                self._live_bytes -= self._record_bytes(memory)
                self._passage_rows.pop(memory.doc_id, None)
                memory_id = memory.memory_id
                self._by_id.pop(memory_id, None)
                self._by_doc.pop(memory.doc_id, None)
                self._columns.clear(memory.doc_id)
                if memory.key:
                    self._slots.get((memory.key, memory.scope), set()).discard(memory_id)
                if replayed is not None:
                    replayed.vectors.pop(memory.doc_id, None)
                    replayed.passages.pop(memory.doc_id, None)
                    replayed.lexical_ops.append((self.seq, "del", memory.doc_id, ""))
        else:
            raise ValueError(f"unknown log record op {op!r}")

    def _record_bytes(self, m: Memory) -> int:
        """About what this memory's put takes in a compacted log (meta JSON + vectors)."""
        return (_RECORD_FIXED_BYTES + 4 * self.dim * (1 + self._passage_rows.get(m.doc_id, 0)) + len(m.content)
                + len(m.context) + len(m.memory_id) * 2
                + sum(len(x) + 3 for x in (*m.entities, *m.source_refs, *m.supersedes, m.key, m.scope))
                + sum(len(k) + len(v) + 6 for k, v in m.metadata.items()))

    @property
    def log_bytes(self) -> int:
        return self._wal.size_bytes()

    @property
    def live_bytes_estimate(self) -> int:
        return max(0, self._live_bytes) + self.idempotency.encoded_bytes

    def compaction_due(self, *, ratio: float, min_bytes: int) -> bool:
        """The byte rule (the log holds ``ratio`` times its live data, and ``min_bytes``), or the log's own rule where
        it has one (a log in the bucket: the segments a takeover reads, server/store/object_wal.py)."""
        size = self.log_bytes
        if size >= min_bytes and size >= ratio * max(1, self.live_bytes_estimate):
            return True
        replay_due = getattr(self._wal, "replay_due", None)
        return bool(replay_due is not None and replay_due(self.live_bytes_estimate))

    def begin_compaction(self) -> CompactionPlan | None:
        """Takes the state to compact at the log's current end; None while another compaction runs. The
        caller holds the shard's write lock (no commit in between) and must call :meth:`run_compaction`."""
        if not self._compact_lock.acquire(blocking=False):
            return None
        if self.closed:
            self._compact_lock.release()
            return None
        return self._plan()

    def _plan(self) -> CompactionPlan:
        with self._lock:
            return CompactionPlan(upto=self._wal.size_bytes(), seq=self.seq,
                                  live=sorted(self._by_id.values(), key=lambda m: m.doc_id),
                                  answered=self.idempotency.live())

    def run_compaction(self, plan: CompactionPlan, *, artefacts: Mapping[str, bytes] | None = None) -> int:
        """Writes the plan's memories (with their vectors, read back from the log) to a new log, appends
        what was committed since the plan, swaps it in; returns the new size. Commits go on meanwhile:
        only the final copy and swap hold the store's lock. A failure (ENOSPC) leaves the old log.
        ``artefacts``: index snapshots at the plan's seq, kept beside the base where the log stores them."""
        try:
            vectors = self._logged_blobs(upto=plan.upto)
            # The base's seq first where the log does not keep it: a restart whose Lucene commit is older rebuilds
            # it (history_from).
            records: list[Record] = [] if self._wal.keeps_base_seq else [({"op": BASE_OP, "seq": plan.seq}, b"")]
            records.extend(({"op": "put", "seq": plan.seq, "m": memory_to_json(m)}, vectors[m.doc_id])
                           for m in plan.live)
            # The answers still inside their window: a retry after the compaction is answered as before.
            records.extend((done.record(plan.seq), b"") for done in plan.answered)
            tmp = self._wal.write_replacement(records, upto=plan.upto, artefacts=artefacts)
            with self._lock:
                if self.closed:
                    tmp.unlink(missing_ok=True)
                    return self._wal.size_bytes()
                size = self._wal.publish(tmp, tail_from=plan.upto)
                self.base_seq = max(self.base_seq, plan.seq)
                self.compactions += 1
            return size
        finally:
            self._compact_lock.release()

    def _logged_blobs(self, *, upto: int | None = None) -> dict[int, bytes]:
        """The last logged vector of each doc id, as bytes, read back from the log (up to ``upto`` bytes)."""
        blobs: dict[int, bytes] = {}
        for meta, blob in self._wal.read(upto=upto):
            if meta.get("op") == "put" and blob:
                blobs[int(meta["m"]["doc"])] = blob
        return blobs

    def exact_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of the live memories, exactly as embedded (read back from the log: a rebuild of an
        SQ8/PQ index must not train on decoded vectors), passage vectors under their ids. Safe on a build thread
        while commits go on."""
        blobs = self._logged_blobs()
        live = [doc for doc in blobs if self.by_doc(doc) is not None]
        sets = [np.frombuffer(blobs[d], dtype=np.float32).reshape(-1, self.dim) for d in live]
        ids, vectors, _ = expand(live, sets, dim=self.dim)
        return ids, vectors

    def passage_counts(self) -> dict[int, int]:
        """doc id -> passage vectors of each live memory that has them (what the dense index is told on load)."""
        with self._lock:
            return dict(self._passage_rows)

    def compact(self) -> int:
        """Rewrites the log as one put per memory it still holds (with its vector), atomically: every
        record of a deleted memory, and every older version of a kept one, is gone from disk afterwards
        (a purge relies on it: it waits for a compaction in flight, then runs its own). Returns the new
        log's size in bytes. Caller holds the shard's write lock."""
        self._compact_lock.acquire()
        return self.run_compaction(self._plan())

    def close(self) -> None:
        with self._compact_lock:   # a compaction in flight finishes (or gives up) first
            with self._lock:
                self.closed = True
                self._wal.close()
