"""One tenant's log in object storage: owner record, fenced WAL segments, base snapshots, a manifest.

Keys under ``tenants/{tenant}/`` (the tenant id URL-quoted):

* ``wal/{seq:020d}``: one immutable object per group commit (or a fence), created with ``If-None-Match: *``
  at the next sequence number, acknowledged only once the store said 200. Sequence numbers are dense: a
  key is only ever created right after the one before it, so the log is every segment in order. A commit's
  header records its time (``"at"``, ms) and, for a Write, the fields of its audit line beyond the memories
  (``"line"``: ``{"key", "at"}``, who and when): it stands for that line until the line is uploaded
  (:mod:`server.store.object_audit`). Commits written before ``"line"`` existed have none.
* ``owner``: ``{"owner", "epoch", "nonce"}``, taken by compare-and-swap (``If-Match`` the ETag read, or
  ``If-None-Match: *`` for the first owner); each taker gets a higher epoch.
* ``manifest``: ``{"base", "base_seq", "epoch", "swapped_s", "artefacts", "fences"}`` by compare-and-swap:
  the base object standing for every segment up to ``base_seq`` (and named artefacts beside it, for a
  shard's index files). Segments up to ``base_seq`` and older bases are deleted ``grace_s`` after the swap,
  except the fences (``fences``: their seqs), which stay for good: the slot right after an owner's last
  segment is always a later taker's fence, and that slot is where a deposed owner would append next; a
  deleted fence would let it create the key again, below the base, where no replay reads (found by the
  state machine in tests/unit/store/test_objectlog.py). One small object per takeover.
* ``base/{seq:020d}-{nonce}``: a base snapshot (records in the WAL's format), immutable.

Taking a tenant over (:meth:`ObjectLog.acquire`): take ``owner`` (epoch e), replay base + segments, then
create a fence segment at the next sequence number. Whatever a deposed owner appended before the fence is
part of the log (it may have been acknowledged) and is replayed; after the fence its next create meets a
412 and it learns it is fenced (:class:`server.errors.NotOwner`), so it can never extend the log. Finally
the manifest is rewritten with epoch e, so a deposed owner's compaction cannot swap it either (its ETag is
stale, or it reads a higher epoch).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from server.errors import NotOwner, StoreUnavailable
from server.store.s3 import Blob, ObjectStore, Taken
from server.store.wal import Record, encode_group, encode_record, parse_records

log = logging.getLogger(__name__)

MAGIC = b"ENGOBJ01"
_HEAD = struct.Struct("<8sII")      # magic, header length, crc32(header + body)
REPLAY_RESTARTS = 8                 # a replay that met a segment deleted under it starts over from the manifest
CAS_TRIES = 16                      # compare-and-swap rounds on a contended owner or manifest record
FETCH_THREADS = 16                  # a replay reads segments in parallel (one GET each; ~100 ms on AWS)


class CorruptObject(ValueError):
    pass


def encode_object(header: Mapping[str, Any], body: bytes = b"") -> bytes:
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    return _HEAD.pack(MAGIC, len(head), zlib.crc32(body, zlib.crc32(head))) + head + body


def decode_object(data: bytes) -> tuple[dict[str, Any], bytes]:
    if len(data) < _HEAD.size:
        raise CorruptObject("short object")
    magic, head_len, crc = _HEAD.unpack_from(data)
    head, body = data[_HEAD.size:_HEAD.size + head_len], data[_HEAD.size + head_len:]
    if magic != MAGIC or len(head) != head_len or zlib.crc32(body, zlib.crc32(head)) != crc:
        raise CorruptObject("bad magic, length or checksum")
    return json.loads(head), body


@dataclass
class Replay:
    """What a replay read: the base's records, then each segment's group in order."""

    base_seq: int = 0
    base: list[Record] = field(default_factory=list)
    segments: list[tuple[int, list[Record]]] = field(default_factory=list)   # (seq, the group's records)
    at_ms: dict[int, int] = field(default_factory=dict)   # a commit's seq → its time ("at"), when it recorded one
    lines: dict[int, dict[str, Any]] = field(default_factory=dict)   # a commit's seq → its Write line's fields
    artefacts: dict[str, bytes] = field(default_factory=dict)

    @property
    def last_seq(self) -> int:
        return self.segments[-1][0] if self.segments else self.base_seq

    def records(self) -> list[Record]:
        return [*self.base, *(r for _, group in self.segments for r in group)]


@dataclass(frozen=True)
class Manifest:
    base: str = ""
    base_seq: int = 0
    epoch: int = 0
    swapped_s: float = 0.0
    artefacts: dict[str, str] = field(default_factory=dict)
    fences: tuple[int, ...] = ()
    etag: str | None = None    # None: no manifest object yet

    def body(self) -> bytes:
        return json.dumps({"base": self.base, "base_seq": self.base_seq, "epoch": self.epoch, "swapped_s": self.swapped_s,
                           "artefacts": self.artefacts, "fences": list(self.fences), "nonce": uuid.uuid4().hex},
                          sort_keys=True).encode()

    @classmethod
    def parse(cls, blob: Blob | None) -> Manifest:
        if blob is None:
            return cls()
        d = json.loads(blob.body)
        return cls(base=d["base"], base_seq=int(d["base_seq"]), epoch=int(d["epoch"]), swapped_s=float(d["swapped_s"]),
                   artefacts=dict(d.get("artefacts", {})), fences=tuple(d.get("fences", ())), etag=blob.etag)


def tenant_root(tenant_id: str) -> str:
    return f"tenants/{quote(tenant_id, safe='')}/"


# The server's own catalog (tenants, keys, settings) is a log like a tenant's, outside ``tenants/`` (tenant ids are
# quoted under it, so no tenant can reach this root).
CATALOG_ROOT = "system/catalog/"


class ObjectLog:
    def __init__(self, store: ObjectStore, tenant_id: str, *, owner_id: str, grace_s: float = 300.0,
                 clock: Callable[[], float] = time.time, root: str = "") -> None:
        self.store = store
        self.tenant_id = tenant_id
        self.owner_id = owner_id
        self.grace_s = grace_s
        self.clock = clock
        self.root = root or tenant_root(tenant_id)   # ``root``: another log than a tenant's (CATALOG_ROOT)
        self.epoch = 0
        self.next_seq = 0               # 0 until acquire()
        self.fenced = False             # a create at next_seq met another owner's segment
        self.uncertain = False          # an append's outcome is unknown: only a reload (replay + fence) settles it
        self._manifest = Manifest()
        self._fences: set[int] = set()  # seqs of every fence this log knows of (kept by garbage collection)
        self._lock = threading.Lock()   # the manifest and the flags (appends are serialised by the store)

    def _seg(self, seq: int) -> str:
        return f"{self.root}wal/{seq:020d}"

    # -- ownership and replay ----------------------------------------------------------------------
    def acquire(self) -> Replay:
        """Takes the tenant over (owner record by CAS), replays it, fences the log; returns the replay."""
        self.epoch = self._take_owner()
        replay = self._fence(self.read())
        self._claim_manifest()
        self.collect()
        log.info("tenant %s: owner %s (epoch %d) at wal seq %d (base %d, %d segments)", self.tenant_id,
                 self.owner_id, self.epoch, self.next_seq, replay.base_seq, len(replay.segments))
        return replay

    def _take_owner(self) -> int:
        key = self.root + "owner"
        for _ in range(CAS_TRIES):
            blob = self.store.get(key)
            epoch = (int(json.loads(blob.body)["epoch"]) if blob is not None else 0) + 1
            body = json.dumps({"owner": self.owner_id, "epoch": epoch, "nonce": uuid.uuid4().hex}).encode()
            try:
                self.store.swap(key, body, etag=blob.etag if blob is not None else None)
            except Taken:
                continue    # another taker won this round: read its record and go one epoch above it
            return epoch
        raise StoreUnavailable(f"tenant {self.tenant_id}: the owner record stayed contended; retry")

    def read(self) -> Replay:
        """Every record from the current manifest's base on (no ownership taken)."""
        for _ in range(REPLAY_RESTARTS):
            manifest = Manifest.parse(self.store.get(self.root + "manifest"))
            replay = self._read_from(manifest)
            if replay is not None:
                with self._lock:
                    self._manifest = manifest
                    self._fences.update(manifest.fences)
                return replay
            log.info("tenant %s: an object of the replay was deleted under it; starting over", self.tenant_id)
        raise StoreUnavailable(f"tenant {self.tenant_id}: the log kept changing under its replay; retry")

    def _read_from(self, manifest: Manifest) -> Replay | None:
        replay = Replay(base_seq=manifest.base_seq)
        if manifest.base:
            blob = self.store.get(manifest.base)
            if blob is None:
                return None
            replay.base = parse_records(decode_object(blob.body)[1])
            for name, key in manifest.artefacts.items():
                art = self.store.get(key)
                if art is None:
                    return None
                replay.artefacts[name] = art.body
        keys = self.store.keys(self.root + "wal/", start_after=self._seg(manifest.base_seq))
        if keys != [self._seg(seq) for seq in range(manifest.base_seq + 1, manifest.base_seq + 1 + len(keys))]:
            return None     # a gap: a newer manifest's deletions; start over from it
        with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
            blobs = list(pool.map(self.store.get, keys))
        for seq, blob in enumerate(blobs, start=manifest.base_seq + 1):
            if blob is None:
                return None
            self._add(replay, seq, blob)
        return replay

    def _add(self, replay: Replay, seq: int, blob: Blob) -> None:
        header, body = decode_object(blob.body)
        if header.get("kind") == "commit":
            replay.segments.append((seq, parse_records(body)))
            replay.at_ms[seq] = int(header.get("at", 0))
            if isinstance(header.get("line"), dict):
                replay.lines[seq] = header["line"]
        elif header.get("kind") == "fence":
            replay.segments.append((seq, []))
            with self._lock:
                self._fences.add(seq)
            if int(header["epoch"]) > self.epoch and self.epoch:
                raise NotOwner(f"tenant {self.tenant_id}: owner epoch {header['epoch']} fenced the log at seq {seq}; "
                               f"this replica (epoch {self.epoch}) no longer owns it")
        else:
            raise CorruptObject(f"{self._seg(seq)}: unknown kind {header.get('kind')!r}")

    def _fence(self, replay: Replay) -> Replay:
        """Creates a fence at the replay's next seq; segments found there first (appended meanwhile) join
        the replay. A fence of a higher epoch means this taker was itself replaced (NotOwner)."""
        seq = replay.last_seq + 1
        while True:
            body = encode_object({"kind": "fence", "epoch": self.epoch, "owner": self.owner_id,
                                  "nonce": uuid.uuid4().hex})
            try:
                self.store.create(self._seg(seq), body)
            except Taken as exc:
                if exc.current is None:
                    continue
                self._add(replay, seq, exc.current)
                seq += 1
                continue
            replay.segments.append((seq, []))
            with self._lock:
                self._fences.add(seq)
            self.next_seq = seq + 1
            return replay

    def _claim_manifest(self) -> None:
        """Rewrites the manifest with this owner's epoch (a deposed owner's compaction then cannot swap it)."""
        self._swap_manifest(lambda m: dataclasses.replace(m, epoch=self.epoch, fences=self._all_fences(m)))

    def _all_fences(self, manifest: Manifest) -> tuple[int, ...]:
        with self._lock:
            return tuple(sorted(self._fences.union(manifest.fences)))

    def _swap_manifest(self, change: Callable[[Manifest], Manifest | None]) -> Manifest | None:
        """CAS loop on the manifest: ``change`` maps the current one to the next (None: keep it)."""
        key = self.root + "manifest"
        with self._lock:
            current = self._manifest
        for _ in range(CAS_TRIES):
            if current.epoch > self.epoch:
                self.fenced = True
                raise NotOwner(f"tenant {self.tenant_id}: the manifest belongs to owner epoch {current.epoch}; "
                               f"this replica (epoch {self.epoch}) no longer owns it")
            new = change(current)
            if new is None:
                return None
            try:
                etag = self.store.swap(key, new.body(), etag=current.etag)
            except Taken:
                current = Manifest.parse(self.store.get(key))
                continue
            new = dataclasses.replace(new, etag=etag)
            with self._lock:
                self._manifest = new
            return new
        raise StoreUnavailable(f"tenant {self.tenant_id}: the manifest stayed contended; retry")

    @property
    def segments_past_base(self) -> int:
        """Segments (commits and fences) after the manifest's base: what a takeover reads one GET each."""
        with self._lock:
            base_seq = self._manifest.base_seq
        return max(0, self.next_seq - 1 - base_seq)

    # -- appends ------------------------------------------------------------------------------------
    def append(self, records: Sequence[Record], *, at_ms: int = 0, line: Mapping[str, Any] | None = None) -> int:
        """Makes one group commit durable as segment ``next_seq``; returns its seq once the store said so.
        ``at_ms``: the commit's time, ``line``: its Write's audit line fields (who, when), both kept in its object
        (what a recovered audit line holds).
        Raises NotOwner when fenced, StoreUnavailable when the store failed (``outcome_unknown``: it may
        have landed; the log refuses further appends until reloaded)."""
        if self.fenced:
            raise NotOwner(f"tenant {self.tenant_id}: this replica was fenced off the log; it no longer owns it")
        if self.uncertain:
            raise StoreUnavailable(f"tenant {self.tenant_id}: an earlier commit's outcome is unknown; the tenant "
                                   "must be reloaded from object storage", outcome_unknown=True)
        if not self.next_seq:
            raise RuntimeError("append before acquire")
        seq = self.next_seq
        header: dict[str, Any] = {"kind": "commit", "epoch": self.epoch, "at": at_ms, "nonce": uuid.uuid4().hex}
        if line:
            header["line"] = dict(line)
        body = encode_object(header, encode_group(records))
        try:
            self.store.create(self._seg(seq), body)
        except Taken as exc:
            self.fenced = True
            log.warning("tenant %s: wal seq %d already written by another owner: fenced (epoch %d)", self.tenant_id,
                        seq, self.epoch)
            raise NotOwner(f"tenant {self.tenant_id}: fenced: another owner took the log at seq {seq}; this replica "
                           "no longer owns the tenant (the write was not applied)") from exc
        except StoreUnavailable as exc:
            # Every failed create counts as one that may have landed, even when no try seemed to reach the
            # server: a SIGKILLed SeaweedFS once kept a segment whose create had failed as "could not connect"
            # (tests/integration/test_object_store.py). The next append would reuse the seq and meet our own
            # earlier bytes as another owner's; only a reload (replay + fence) settles it.
            self.uncertain = True
            log.warning("tenant %s: the outcome of wal seq %d is unknown (%s); reload needed", self.tenant_id, seq, exc)
            if exc.outcome_unknown:
                raise
            raise StoreUnavailable(f"{exc}; the outcome is unknown until the tenant is reloaded",
                                   outcome_unknown=True) from exc
        self.next_seq = seq + 1
        return seq

    # -- compaction ---------------------------------------------------------------------------------
    def compact(self, records: Sequence[Record], *, upto_seq: int,
                artefacts: Mapping[str, bytes] | None = None) -> bool:
        """Writes a base standing for every segment up to ``upto_seq`` (``records``; ``artefacts`` are
        stored beside it under their names) and swaps the manifest to it. False when the manifest already
        had a base at least as new. Old segments go ``grace_s`` later (:meth:`collect`)."""
        if self.fenced:
            raise NotOwner(f"tenant {self.tenant_id}: this replica was fenced off the log; it no longer owns it")
        nonce = uuid.uuid4().hex
        base_key = f"{self.root}base/{upto_seq:020d}-{nonce}"
        self.store.create(base_key, encode_object({"kind": "base", "seq": upto_seq, "epoch": self.epoch},
                                                  b"".join(encode_record(m, b) for m, b in records)))
        named = {name: f"{base_key}.{name}" for name in (artefacts or {})}
        for name, data in (artefacts or {}).items():
            self.store.create(named[name], data)
        swapped = self._swap_manifest(lambda m: None if m.base_seq >= upto_seq else dataclasses.replace(
            m, base=base_key, base_seq=upto_seq, epoch=self.epoch, swapped_s=self.clock(), artefacts=named,
            fences=self._all_fences(m)))
        if swapped is None:
            for key in (base_key, *named.values()):
                self.store.delete(key)
            return False
        log.info("tenant %s: base at wal seq %d (%d records)", self.tenant_id, upto_seq, len(records))
        return True

    def collect(self) -> int:
        """Deletes what the manifest superseded at least ``grace_s`` ago: segments up to its base (not the
        fences) and bases (with their artefacts) older than its own. Returns how many objects went."""
        with self._lock:
            manifest = self._manifest
        now = self.clock()
        if not manifest.base or now - manifest.swapped_s < self.grace_s:
            return 0
        keep = {manifest.base, *manifest.artefacts.values()}
        fences = {self._seg(seq) for seq in manifest.fences}
        doomed = [key for key in self.store.keys(self.root + "wal/")
                  if key <= self._seg(manifest.base_seq) and key not in fences]
        # Only older bases: a newer one may be a compaction in flight (its manifest swap not yet made).
        doomed += [key for key in self.store.keys(self.root + "base/") if key not in keep and key < manifest.base]
        if not doomed:
            return 0
        deleted = self.store.delete_many(doomed)
        log.info("tenant %s: deleted %d superseded objects", self.tenant_id, deleted)
        return deleted
