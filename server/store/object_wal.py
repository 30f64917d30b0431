"""A :class:`server.store.durable_log.TenantLog` whose source of truth is object storage.

Every group commit is one fenced segment object (:class:`server.store.objectlog.ObjectLog`); the local
``memories.wal`` (the local log's own format) is only a cache that reads go to (a compaction's vectors, an
index rebuild's exact vectors). Opening always takes the tenant over, replays from the manifest's base and
rewrites the cache from scratch, so a fresh process with an empty data dir rebuilds the tenant from the
bucket, and a stale cache (another owner appended since) is never believed.

Compaction: ``write_replacement(records, upto=...)`` writes the base object and swaps the manifest (slow,
outside the store's lock), then the cache file's own replacement; ``publish`` swaps the cache in. The
cache's byte offsets are mapped to wal sequence numbers (``_seq_at``), so a base made from the cache's
first ``upto`` bytes is a base for exactly the segments they hold.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from server.errors import StoreUnavailable
from server.store.durable_log import CATALOG_FILE, TenantLog
from server.store.memory_store import LOG_FILE
from server.store.audit import write_line
from server.store.object_audit import BucketAuditLog, Commit, commit_of
from server.store.objectlog import CATALOG_ROOT, ObjectLog, Replay, tenant_root
from server.store.s3 import ObjectStore, Taken, make_client, verify_conditional_writes
from server.store.wal import Record, WriteAheadLog, encode_group, encode_record, fsync_dir

if TYPE_CHECKING:
    from server.config import ObjectStoreConfig

log = logging.getLogger(__name__)


class ObjectBackedLog:
    def __init__(self, objects: ObjectLog, cache: WriteAheadLog, seq_at: dict[int, int], *,
                 compacted_seq: int = 0, artefacts: dict[str, bytes] | None = None, compact_segments: int = 0) -> None:
        self.objects = objects
        self.compact_segments = compact_segments   # the segment rule's floor (segments_due; 0: the byte rule only)
        # What the last compaction stored beside its base (write_replacement's ``artefacts``: a shard's index
        # files), as loaded; the shard takes them (``take_artefacts``) and rebuilds what is missing.
        self._artefacts = artefacts or {}
        # The store seq the replayed base was compacted at (0: no base). History before it is gone from the
        # log, so an index cache committed before it (another owner compacted since: a delete in between
        # has no record left to replay) cannot be caught up and must be rebuilt from the store.
        self.compacted_seq = compacted_seq
        self._cache = cache
        self._seq_at = seq_at       # cache byte offset at a segment's end → that segment's wal seq
        self._cache_ok = True       # False after a cache write failed (ENOSPC): reads go to the bucket
        self._lock = threading.Lock()
        # The replay's last commits (the audit log's taker recovers lines for commits past what its lines cover,
        # carried Write lines among them: server/store/object_audit.py), and the last commit since.
        self._tail: list[Commit] = []
        self.last_commit = Commit()
        self._audit: BucketAuditLog | None = None

    @classmethod
    def open(cls, directory: Path, objects: ObjectLog, *, cache_name: str = LOG_FILE,
             compact_segments: int = 0) -> tuple[ObjectBackedLog, list[Record]]:
        """Takes the tenant over (owner CAS, replay, fence) and rebuilds the local cache (``directory /
        cache_name``) from the replay."""
        replay = objects.acquire()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / cache_name
        parts = [b"".join(encode_record(meta, blob) for meta, blob in replay.base)]
        seq_at = {len(parts[0]): replay.base_seq}
        size = len(parts[0])
        for seq, group in replay.segments:
            if group:
                parts.append(encode_group(group))
                size += len(parts[-1])
            seq_at[size] = seq
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(parts))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(directory)
        compacted = max((int(meta.get("seq", 0)) for meta, _ in replay.base), default=0)
        # The cache's appends are not fsynced: an acknowledged commit is in the bucket, and every open rewrites the
        # cache from the bucket (above), so nothing ever reads a cache that a crash of the machine cut short.
        opened = cls(objects, WriteAheadLog(path, sync=False), seq_at, compacted_seq=compacted,
                     artefacts=replay.artefacts, compact_segments=compact_segments)
        opened._tail = _tail_commits(replay)
        opened.last_commit = Commit(seq=max([compacted, *(c.seq for c in opened._tail)]))
        return opened, replay.records()

    def open_audit(self, directory: Path, *, retention_s: float, max_bytes: int) -> BucketAuditLog:
        """The tenant's audit log beside this log in the bucket, taken over by this owner (AuditPolicy.open)."""
        tail, self._tail = self._tail, []
        self._audit = BucketAuditLog.open(
            self.objects.store, self.objects.root + "audit/", tenant_id=self.objects.tenant_id,
            epoch=self.objects.epoch, owner_id=self.objects.owner_id, last_commit=lambda: self.last_commit,
            tail=tail, directory=directory, retention_s=retention_s, max_bytes=max_bytes)
        return self._audit

    stores_artefacts = True
    keeps_base_seq = True   # the base's seq is the replay's compacted_seq

    def replay_due(self, live_bytes: int) -> bool:
        """Whether the segments past the base call for a compaction (:func:`segments_due`)."""
        return segments_due(self.objects.segments_past_base, live_bytes, self.compact_segments)

    @property
    def needs_reload(self) -> bool:
        return self.objects.fenced or self.objects.uncertain or (self._audit is not None and self._audit.needs_reload)

    def take_artefacts(self) -> dict[str, bytes]:
        """The artefacts the replayed base carried (once: the log keeps no reference to them)."""
        artefacts, self._artefacts = self._artefacts, {}
        return artefacts

    def append(self, records: Sequence[Record]) -> None:
        at_ms = int(self.objects.clock() * 1000)
        line = write_line()   # a Write's commit records its audit line's fields (audit.writing)
        seq = self.objects.append(records, at_ms=at_ms, line=line)   # durable (the store said 200) from here on
        store_seq = _store_seq(records)
        if store_seq >= self.last_commit.seq:
            self.last_commit = commit_of(records, seq=store_seq, at_ms=at_ms, line=line)
        with self._lock:
            if not self._cache_ok:
                return
            try:
                self._cache.append(records)
            except OSError as exc:   # the commit is durable all the same: only the cache is lost
                self._cache_ok = False
                log.warning("tenant %s: the local cache of its log failed (%s); reading from the bucket until the "
                            "tenant is reloaded", self.objects.tenant_id, exc)
                return
            self._seq_at[self._cache.size_bytes()] = seq

    @property
    def path(self) -> Path:
        return self._cache.path

    def size_bytes(self) -> int:
        return self._cache.size_bytes()

    def read(self, *, upto: int | None = None) -> list[Record]:
        if not self._cache_ok:
            if upto is not None:
                raise StoreUnavailable(f"tenant {self.objects.tenant_id}: the log's local cache is lost; reload")
            return self.objects.read().records()
        return self._cache.read(upto=upto)

    def write_replacement(self, records: Sequence[Record], *, upto: int | None = None,
                          artefacts: Mapping[str, bytes] | None = None) -> Path:
        with self._lock:
            if not self._cache_ok:
                raise StoreUnavailable(f"tenant {self.objects.tenant_id}: the log's local cache is lost; it is "
                                       "compacted after a reload")
            if upto is None:
                raise ValueError("a base in object storage needs the log size it stands for (upto)")
            seq = self._seq_at[upto]
        if self._audit is not None:   # no line of a commit folded into the base may wait in the buffer
            self._audit.upload_pending(carry_after=self.last_commit.seq)
        self.objects.compact(records, upto_seq=seq, artefacts=artefacts)
        self.objects.collect()
        return self._cache.write_replacement(records)

    def publish(self, tmp: Path, *, tail_from: int | None) -> int:
        with self._lock:
            before = self._cache.size_bytes()
            tail = before if tail_from is None else tail_from
            base_seq = self._seq_at[tail]
            size = self._cache.publish(tmp, tail_from=tail_from)
            head = size - (before - tail)     # the replacement's bytes; the tail was copied behind them
            self._seq_at = {head: base_seq, **{head + off - tail: s for off, s in self._seq_at.items() if off > tail}}
            return size

    def collect_garbage(self) -> int:
        """Deletes superseded segments and bases whose grace period has passed (see ObjectLog.collect)."""
        return self.objects.collect()

    def close(self) -> None:
        self._cache.close()


# Replayed commits kept for the audit log's recovery: an owner leaves at most object_audit.MAX_CARRIED carried
# lines and its last commit's line unuploaded, plus the commits audited by no line (access counts, re-indexes).
AUDIT_TAIL = 4096


def _tail_commits(replay: Replay) -> list[Commit]:
    """The replay's last AUDIT_TAIL commits, each with the memories it created (ids put before it in the
    replay, base included, are not created again)."""
    groups = [(seq, group) for seq, group in replay.segments if group]
    tail, before = groups[-AUDIT_TAIL:], groups[:-AUDIT_TAIL]
    wanted = {meta["m"]["id"] for _, group in tail for meta, _ in group if meta.get("op") == "put"}
    earlier = itertools.chain(replay.base, (record for _, group in before for record in group))
    seen = {meta["m"]["id"] for meta, _ in earlier if meta.get("op") in ("put", "upd") and meta["m"]["id"] in wanted}
    return [commit_of(group, seq=_store_seq(group), at_ms=replay.at_ms.get(seq, 0), seen=seen,
                      line=replay.lines.get(seq)) for seq, group in tail]


def _store_seq(records: Sequence[Record]) -> int:
    return max((int(meta.get("seq", 0)) for meta, _ in records), default=0)


# The live bytes one more segment past the base may stand for before the segment rule compacts: a takeover reads the
# base (live data, one large GET at the bucket's bandwidth) and every segment after it (one small GET each,
# FETCH_THREADS at a time: ~6 ms a segment on AWS at ~100 ms a GET, about what 256 KiB-1 MiB of base take), and each
# compaction rewrites the base once, so a Write pays about this many bytes of rewrite: near the ~100-200 KB a Write of
# 128 chat turns appends, the byte rule's own 1x.
SEGMENT_BASE_BYTES = 256 << 10
# The segment rule's floor: a small tenant's base is not rewritten for every few Writes (300 segments replay in ~1 s on
# SeaweedFS, ~2 s at 16 GETs at once on AWS: docs/operations/object-storage.md).
COMPACT_SEGMENTS = 256


def segments_due(segments: int, live_bytes: int, floor: int) -> bool:
    """The segment rule: ``segments`` past the base reach ``floor`` (:data:`COMPACT_SEGMENTS`; 0: never)
    and one for each :data:`SEGMENT_BASE_BYTES` of ``live_bytes``, so a takeover's replay stays within a few
    times the base's own read however long the tenant only appends (the byte rule never fires then). Pure."""
    return floor > 0 and segments >= max(floor, live_bytes // SEGMENT_BASE_BYTES)


@dataclass(frozen=True)
class ObjectLogBackend:
    """Opens tenants' logs in one bucket as one owner (this process). Built once at start by the
    composition root; :meth:`verify` is the start-up self-check."""

    store: ObjectStore
    owner_id: str
    grace_s: float
    compact_segments: int = COMPACT_SEGMENTS   # the segment rule's floor (segments_due; 0: the byte rule only)

    @classmethod
    def from_config(cls, config: ObjectStoreConfig, *, env: Mapping[str, str], owner_id: str = "") -> ObjectLogBackend:
        client = make_client(endpoint=config.endpoint, region=config.region,
                             access_key=env.get(config.access_key_env, ""), secret_key=env.get(config.secret_key_env, ""),
                             timeout_s=config.timeout_s)
        store = ObjectStore(client, bucket=config.bucket, prefix=config.prefix, attempts=config.attempts)
        return cls(store=store, owner_id=owner_id or f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:8]}",
                   grace_s=config.grace_s)

    def verify(self) -> None:
        """Raises UnsafeObjectStore when the endpoint ignores conditional writes (refuse to start)."""
        verify_conditional_writes(self.store)

    def opener(self, tenant_id: str) -> _Opener:
        """The LogOpener of one tenant (``TenantStore.open(directory, dim=..., open_log=...)``). Pass a key
        that is new for each incarnation of a tenant id (e.g. the id and its creation time): a deposed owner
        that never learned of a drop could otherwise append to a re-created tenant's log."""
        return _Opener(self, tenant_id)

    def catalog_opener(self) -> _Opener:
        """The LogOpener of the server's catalog (tenants, keys, settings: server/tenants/catalog.py), kept in
        the bucket under CATALOG_ROOT; its local cache is the file a local catalog would use."""
        return _Opener(self, "catalog", root=CATALOG_ROOT, cache_name=CATALOG_FILE)

    def holds_catalog(self) -> bool:
        """Whether the bucket holds a catalog log (one commit at least)."""
        return bool(self.store.keys(CATALOG_ROOT + "wal/")) or self.store.get(CATALOG_ROOT + "manifest") is not None

    def vector_space(self, current: Mapping[str, object]) -> dict[str, object]:
        """The embedder the bucket's vectors come from (``system/embedder.json``): recorded by the first server
        to start on the bucket (``current``), returned as recorded ever after."""
        key = "system/embedder.json"
        blob = self.store.get(key)
        if blob is None:
            try:
                self.store.create(key, json.dumps(dict(current)).encode())
            except Taken:
                pass   # another server recorded it first: its record stands
            blob = self.store.get(key)
        if blob is None:
            raise StoreUnavailable(f"{key} vanished right after it was written; retry")
        return dict(json.loads(blob.body))

    def drop_tenant(self, tenant_id: str) -> int:
        """Deletes every object of the tenant's log (its owner record, segments, bases, manifest); returns
        how many. Its shard must be closed first."""
        keys = self.store.keys(tenant_root(tenant_id))
        return self.store.delete_many(keys)


@dataclass(frozen=True)
class _Opener:
    backend: ObjectLogBackend
    tenant_id: str
    root: str = ""               # "": the tenant's (objectlog.tenant_root)
    cache_name: str = LOG_FILE

    def __call__(self, directory: Path) -> tuple[TenantLog, list[Record]]:
        objects = ObjectLog(self.backend.store, self.tenant_id, owner_id=self.backend.owner_id,
                            grace_s=self.backend.grace_s, root=self.root)
        return ObjectBackedLog.open(directory, objects, cache_name=self.cache_name,
                                    compact_segments=self.backend.compact_segments)
