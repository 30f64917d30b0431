"""A tenant's audit log in object storage, beside its memory log, written by the log's owner and fenced like it.

Keys under ``tenants/{tenant}/audit/``: ``{seq:020d}``, one immutable object per upload (a group of audit
lines in the format of a segment file), created with ``If-None-Match: *`` at the next sequence number, or
a fence. The log does not move when its tenant moves: ``Audit`` on any replica, after any number of
takeovers, reads the same objects.

* **Fencing.** The owner opens the audit log right after it took the tenant's memory log (epoch e): it
  creates a fence object of epoch e at the slot after the last object. A deposed owner's next upload meets
  that fence (412) and learns it is fenced (:class:`server.errors.NotOwner`); a taker that meets a fence of
  a higher epoch on its way was itself replaced. Fences are never deleted (the slot after an owner's last
  object is always its taker's fence; see :mod:`server.store.objectlog`).
* **Durable before the acknowledgement.** A change's line (write, merge, supersede, delete, confirm, archive,
  expiry, consolidation, links) is durable before the call answers: the engine appends it under the tenant's
  write lock right after the commit. Most lines are uploaded there and then (concurrent appenders share one
  upload). A Write's line is *carried by its commit* instead: the Write commits inside
  :func:`server.store.audit.writing` (its key id and time), so the commit object records every field of its
  line beyond the memories (``"line"``: who and when, beside what it put and its store seq); when the line is
  exactly the one a recovery would build from the tenant's last commit (op WRITE, no note, the memories it put,
  the same key id and time), it waits in the buffer and the Write costs one conditional PUT, not two. Any other
  line, a Write committed outside ``writing`` included, is uploaded before the answer. Buffered lines (carried
  ones, searches and uses) are uploaded by the periodic flush (``sync``), by the next upload, before a read,
  before a compaction, on close, and at once when ``MAX_CARRIED`` carried lines wait; a replica killed between
  two flushes loses at most that interval's search lines.
* **Exactly once across a kill.** Each change line carries the store seq of the commit it describes
  (``"s"``), and each object the highest such seq (``covered``). Commits past ``covered`` are those whose line
  never reached the audit log: a carried line still in a dead owner's buffer, or a commit whose owner died
  before its line's upload. The taker, once fenced, finds them in its replay (``ObjectBackedLog.open`` keeps
  the last ``AUDIT_TAIL`` commits) and uploads one WRITE line per commit naming the memories it created (puts
  of ids the replay had not seen before: a put again of a known memory, the extractor's re-index, creates
  nothing) and one DELETE line for those it deleted. A commit that recorded its line's fields gets that line
  byte for byte (key id and time included: the audit reads as if the owner had flushed); an older commit
  object (written before ``"line"``) or a delete gets a line noted ``recovered``, at the commit's time (its
  object's ``"at"``), without a key id. Because the fence comes first, the dead owner's upload either landed
  before it (then ``covered`` says so and nothing is recovered) or never lands. An update's kind (merge,
  supersede, archive ...) is not in the log, so those lines are never carried (always uploaded before the
  answer) and not recovered. A compaction first uploads every buffered line and has the lines of commits it
  folds into its base uploaded at once (``carry_after``): a base holds no commits, so nothing below it could
  be recovered.
* **Retention and cap** as on one node: objects whose last line is older than ``retention_s`` go, then the
  oldest while the tenant's audit objects exceed ``max_bytes`` (never the newest, never a fence), applied by
  the owner's periodic flush.
* **Entry ids** are ``seq << 16 | line index`` (the page token); at most ``MAX_LINES`` lines per object.
* Segment files found in the tenant's directory (a node that kept its audit locally before its log moved to
  the bucket) are uploaded once, after the fence, and renamed ``*.imported``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.domain import AuditEntry, AuditOp, AuditRef
from server.errors import NotOwner, StoreUnavailable
from server.store.audit import encode_line, entry_matches, parse_line, segments
from server.store.objectlog import CorruptObject, decode_object, encode_object
from server.store.s3 import Blob, ObjectStore, Taken
from server.store.wal import Record

log = logging.getLogger(__name__)

LINE_BITS = 16
MAX_LINES = 4096                  # lines per object (entry ids keep 16 bits for the index)
ASYNC_OPS = frozenset({AuditOp.SEARCH, AuditOp.USE})   # reads: uploaded by the flush, not before the answer
FENCE_MAX_BYTES = 512             # a fence object is ~200 bytes; smaller objects are read before retention
READ_AHEAD = 8                    # objects a read fetches at once
MAX_CARRIED = 256                 # carried Write lines buffered at most; then they are uploaded with the next one


@dataclass
class _Object:
    seq: int
    size: int
    at_s: float
    fence: bool = False


def _lines(body: bytes) -> list[bytes]:
    return [raw for raw in body.split(b"\n") if raw]


@dataclass(frozen=True)
class Commit:
    """What the audit log knows of one commit of the tenant's memory log: its store seq, its time (ms; 0:
    unknown), the memories it put (``created``: as a WRITE line names them), the ids it deleted, and its
    Write line's key id and time (``line_at_ms`` 0: the commit recorded no line, an older object's)."""

    seq: int = 0
    at_ms: int = 0
    created: tuple[AuditRef, ...] = ()
    deleted: tuple[str, ...] = ()
    key_id: str = ""
    line_at_ms: int = 0


def put_ref(memory: dict[str, Any]) -> AuditRef:
    """A put record's memory (its JSON) as an audit line names it."""
    return AuditRef(memory_id=memory["id"], source_refs=tuple(memory.get("source_refs", ())))


def commit_of(records: Sequence[Record], *, seq: int, at_ms: int, seen: set[str] | None = None,
              line: Mapping[str, Any] | None = None) -> Commit:
    """A group's Commit. ``seen``: the memory ids put before it (a replay's); a put of one of them creates
    nothing (the set is extended). None: every put counts (the group a live owner just committed). ``line``:
    the Write line fields its object recorded (:func:`server.store.audit.writing`)."""
    created: list[AuditRef] = []
    deleted: list[str] = []
    for meta, _ in records:
        op = meta.get("op")
        if op == "put" and (seen is None or meta["m"]["id"] not in seen):
            created.append(put_ref(meta["m"]))
        if op in ("put", "upd") and seen is not None:
            seen.add(meta["m"]["id"])
        elif op == "del":
            deleted += meta["ids"]
    return Commit(seq=seq, at_ms=at_ms, created=tuple(created), deleted=tuple(deleted),
                  key_id=str((line or {}).get("key", "")), line_at_ms=int((line or {}).get("at", 0)))


def write_line_of(commit: Commit) -> bytes:
    """The WRITE line the commit stands for, as its owner appended it (the commit recorded its fields)."""
    return encode_line(AuditOp.WRITE, commit.created, at_ms=commit.line_at_ms, key_id=commit.key_id,
                       extra={"s": commit.seq})


def recovered_lines(tail: Sequence[Commit], *, covered: int, at_ms: int) -> list[bytes]:
    """Audit lines for the commits past ``covered`` (store seq): the memories each created (the Write's own line
    when the commit recorded its fields) or deleted, else noted ``recovered`` at the commit's time (``at_ms``
    when the commit object did not record one)."""
    out: list[bytes] = []
    for commit in tail:
        if commit.seq <= covered:
            continue
        if commit.created and commit.line_at_ms:
            out.append(write_line_of(commit))
        elif commit.created:
            out.append(encode_line(AuditOp.WRITE, commit.created, at_ms=commit.at_ms or at_ms, note="recovered",
                                   extra={"s": commit.seq}))
        if commit.deleted:
            out.append(encode_line(AuditOp.DELETE, [AuditRef(memory_id=i) for i in commit.deleted],
                                   at_ms=commit.at_ms or at_ms, note="recovered", extra={"s": commit.seq}))
    return out


class BucketAuditLog:
    """The AuditLog interface (append, sync, maintain, size_bytes, read, close) over one tenant's audit objects."""

    def __init__(self, store: ObjectStore, root: str, *, tenant_id: str, epoch: int, owner_id: str,
                 last_commit: Callable[[], Commit], retention_s: float = 0.0, max_bytes: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.root = root                  # tenants/{tenant}/audit/
        self.tenant_id = tenant_id
        self.epoch = epoch
        self.owner_id = owner_id
        self.retention_s = retention_s
        self.max_bytes = max_bytes
        self._last_commit = last_commit   # the tenant's last commit (its store seq and what it put)
        self._clock = clock
        self._objects: dict[int, _Object] = {}
        self.next_seq = 0
        self.covered = 0                  # the highest store seq a change line uploaded names
        self.fenced = False
        self.uncertain = False            # an upload's outcome is unknown: a reload settles it
        self._lock = threading.Lock()     # the pending lines
        self._upload_lock = threading.Lock()   # one upload at a time, in seq order
        self._pending: list[bytes] = []
        self._pending_covered = 0
        self._carried = 0                 # carried Write lines among the pending ones
        self.carry_after = 0              # lines of commits up to this store seq are uploaded, never carried
        self._appended = 0                # lines appended since open
        self._uploaded = 0                # of which uploaded (or dropped by a failure)
        self.lost_lines = 0
        self.directory: Path | None = None
        self._checked: set[int] = set()   # listed objects read to learn whether they are fences

    def _key(self, seq: int) -> str:
        return f"{self.root}{seq:020d}"

    # -- opening: fence, recover, import ----------------------------------------------------------------
    @classmethod
    def open(cls, store: ObjectStore, root: str, *, tenant_id: str, epoch: int, owner_id: str,
             last_commit: Callable[[], Commit], tail: Sequence[Commit], directory: Path,
             retention_s: float = 0.0, max_bytes: int = 0) -> BucketAuditLog:
        audit = cls(store, root, tenant_id=tenant_id, epoch=epoch, owner_id=owner_id, last_commit=last_commit,
                    retention_s=retention_s, max_bytes=max_bytes)
        audit.directory = directory
        audit._take_over(tail)
        return audit

    def _take_over(self, tail: Sequence[Commit]) -> None:
        for item in self.store.listing(self.root):
            name = item.key[len(self.root):]
            if name.isdigit():
                self._objects[int(name)] = _Object(int(name), item.size, item.modified_s)
        ever_written = any(True for _ in self._objects)
        for seq in sorted(self._objects, reverse=True):    # back to the last object holding lines
            blob = self.store.get(self._key(seq))
            if blob is not None and self._note(seq, blob) == "lines":
                break
        # An audit log no owner of this version opened: the commits before it are an older version's (their
        # lines are local segments, imported below), so the first fence covers them.
        self._fence(max(self._objects, default=0) + 1,
                    covered=self.covered if ever_written else self._last_commit().seq)
        if ever_written:
            lines = recovered_lines(tail, covered=self.covered, at_ms=int(self._clock() * 1000))
            if lines:
                log.warning("tenant %s: %d audit line(s) recovered for commits their owner left without one",
                            self.tenant_id, len(lines))
                self._upload_lines(lines, covered=max(c.seq for c in tail))
        self._import_local()

    def _note(self, seq: int, blob: Blob) -> str:
        """Reads an object's header; raises NotOwner at a fence of a higher epoch. Returns its kind."""
        header, _ = decode_object(blob.body)
        kind = header.get("kind")
        self.covered = max(self.covered, int(header.get("covered", 0)))
        self._checked.add(seq)
        if kind == "fence":
            self._objects.setdefault(seq, _Object(seq, len(blob.body), self._clock())).fence = True
            if int(header["epoch"]) > self.epoch:
                self.fenced = True
                raise NotOwner(f"tenant {self.tenant_id}: owner epoch {header['epoch']} fenced the audit log at seq "
                               f"{seq}; this replica (epoch {self.epoch}) no longer owns it")
            return "fence"
        if kind != "lines":
            raise CorruptObject(f"{self._key(seq)}: unknown kind {kind!r}")
        return "lines"

    def _fence(self, seq: int, *, covered: int) -> None:
        while True:
            body = encode_object({"kind": "fence", "epoch": self.epoch, "owner": self.owner_id, "covered": covered,
                                  "nonce": uuid.uuid4().hex})
            try:
                self.store.create(self._key(seq), body)
            except Taken as exc:
                if exc.current is not None:   # another upload landed there first: a deposed owner's, or a fence
                    self._objects[seq] = _Object(seq, len(exc.current.body), self._clock())
                    self._note(seq, exc.current)
                    seq += 1
                continue
            self._objects[seq] = _Object(seq, len(body), self._clock(), fence=True)
            self.next_seq = seq + 1
            self.covered = max(self.covered, covered)
            return

    def _import_local(self) -> None:
        if self.directory is None:
            return
        found = segments(self.directory)
        if not found:
            return
        lines = [raw for _, path in found for raw in _lines(path.read_bytes())]
        for start in range(0, len(lines), MAX_LINES):
            self._upload_lines(lines[start:start + MAX_LINES], covered=0)
        for _, path in found:
            os.replace(path, path.with_name(path.name + ".imported"))
        log.info("tenant %s: %d audit lines of %d local segment(s) moved to the bucket", self.tenant_id, len(lines),
                 len(found))

    # -- appends ------------------------------------------------------------------------------------
    def _upload_lines(self, lines: Sequence[bytes], *, covered: int) -> None:
        """One object at ``next_seq``; raises NotOwner when fenced, StoreUnavailable when its outcome is unknown."""
        if self.fenced:
            raise NotOwner(f"tenant {self.tenant_id}: this replica was fenced off the audit log")
        if self.uncertain:
            raise StoreUnavailable(f"tenant {self.tenant_id}: an earlier audit upload's outcome is unknown; the "
                                   "tenant must be reloaded", outcome_unknown=True)
        seq = self.next_seq
        covered = max(covered, self.covered)
        body = encode_object({"kind": "lines", "epoch": self.epoch, "covered": covered, "n": len(lines),
                              "nonce": uuid.uuid4().hex}, b"".join(lines))
        try:
            self.store.create(self._key(seq), body)
        except Taken as exc:
            self.fenced = True
            raise NotOwner(f"tenant {self.tenant_id}: fenced: another owner took the audit log at seq {seq}") from exc
        except StoreUnavailable as exc:
            self.uncertain = True
            raise StoreUnavailable(f"{exc}; the audit upload's outcome is unknown until the tenant is reloaded",
                                   outcome_unknown=True) from exc
        self._objects[seq] = _Object(seq, len(body), self._clock())
        self._checked.add(seq)   # known: lines, not a fence
        self.next_seq = seq + 1
        self.covered = covered

    def _upload_through(self, count: int) -> None:
        """Uploads the pending lines (one object, or a few of MAX_LINES) until ``count`` lines are uploaded."""
        with self._upload_lock:
            while self._uploaded < count:
                with self._lock:
                    lines, covered = self._pending[:MAX_LINES], self._pending_covered
                try:
                    self._upload_lines(lines, covered=covered)
                except (NotOwner, StoreUnavailable):
                    with self._lock:   # the lines' fate is the log's (fenced, or known only after a reload)
                        del self._pending[:len(lines)]
                        self._uploaded += len(lines)
                        self.lost_lines += len(lines)
                        if not self._pending:
                            self._carried = 0
                    raise
                with self._lock:
                    del self._pending[:len(lines)]
                    self._uploaded += len(lines)
                    if not self._pending:
                        self._carried = 0

    def append(self, op: AuditOp, refs: Iterable[AuditRef], *, at_ms: int, key_id: str = "", query: str = "",
               note: str = "") -> None:
        refs = tuple(refs)
        change = op not in ASYNC_OPS
        commit = self._last_commit() if change else Commit()
        line = encode_line(op, refs, at_ms=at_ms, key_id=key_id, query=query, note=note,
                           extra={"s": commit.seq} if change else None)
        carried = (change and commit.line_at_ms > 0 and commit.seq > self.carry_after
                   and line == write_line_of(commit))   # a recovery would build this very line
        with self._lock:
            self._pending.append(line)
            self._appended += 1
            self._pending_covered = max(self._pending_covered, commit.seq)
            self._carried += carried
            mine = self._appended
            upload = change and (not carried or self._carried >= MAX_CARRIED)
        if upload:
            self._upload_through(mine)

    def upload_pending(self, *, carry_after: int) -> None:
        """Before a compaction folds the commits up to store seq ``carry_after`` into a base: their lines are no
        longer carried (later ones for them are uploaded at once) and the buffered ones are uploaded now.
        Raises NotOwner or StoreUnavailable (the compaction then waits for the next one)."""
        with self._lock:
            self.carry_after = max(self.carry_after, carry_after)
            target = self._appended
        self._upload_through(target)

    def sync(self) -> None:
        """Uploads the buffered search and use lines. A failure is logged (the lines are lost; a fenced or
        uncertain log is reloaded with its tenant)."""
        with self._lock:
            target = self._appended
        try:
            self._upload_through(target)
        except (NotOwner, StoreUnavailable) as exc:
            log.warning("tenant %s: audit lines could not be uploaded (%s)", self.tenant_id, exc)

    @property
    def needs_reload(self) -> bool:
        return self.fenced or self.uncertain

    # -- retention ----------------------------------------------------------------------------------
    def maintain(self) -> int:
        """Deletes objects past retention, then the oldest while over the cap (never a fence or the newest)."""
        with self._upload_lock:
            objects = sorted(self._objects.values(), key=lambda o: o.seq)
            if not objects:
                return 0
            while True:   # only objects that would go are read to learn whether they are fences
                doomed = self._doomed(objects)
                unknown = [self._objects[seq] for seq in doomed if seq not in self._checked]
                if not unknown:
                    break
                self._learn_fences(unknown)
            if not doomed:
                return 0
            try:
                self.store.delete_many([self._key(seq) for seq in sorted(doomed)])
            except StoreUnavailable as exc:
                log.warning("tenant %s: audit retention could not delete (%s); next flush", self.tenant_id, exc)
                return 0
            for seq in doomed:
                self._objects.pop(seq, None)
            log.info("tenant %s: %d audit object(s) expired", self.tenant_id, len(doomed))
            return len(doomed)

    def _doomed(self, objects: Sequence[_Object]) -> set[int]:
        """Past retention, then the oldest while over the cap; never a known fence or the newest object."""
        now = self._clock()
        candidates = [o for o in objects if not o.fence and o.seq != objects[-1].seq]
        doomed = {o.seq for o in candidates if self.retention_s > 0 and o.at_s < now - self.retention_s}
        total = sum(o.size for o in objects if o.seq not in doomed)
        for o in candidates:
            if self.max_bytes <= 0 or total <= self.max_bytes:
                break
            if o.seq not in doomed:
                doomed.add(o.seq)
                total -= o.size
        return doomed

    def _learn_fences(self, objects: Sequence[_Object]) -> None:
        """Reads the small objects a listing found (a fence is one of them) to learn which are fences."""
        for o in objects:
            if o.size <= FENCE_MAX_BYTES and o.seq not in self._checked:
                blob = self.store.get(self._key(o.seq))
                if blob is not None and decode_object(blob.body)[0].get("kind") == "fence":
                    o.fence = True
            self._checked.add(o.seq)

    def size_bytes(self) -> int:
        with self._lock:
            pending = sum(len(line) for line in self._pending)
        return sum(o.size for o in list(self._objects.values())) + pending

    def close(self) -> None:
        self.sync()

    # -- reads --------------------------------------------------------------------------------------
    def read(self, *, after: int, limit: int, ops: frozenset[AuditOp] = frozenset(),
             memory_id: str = "") -> tuple[list[AuditEntry], int]:
        """As AuditLog.read: up to ``limit`` matching entries from entry id ``after`` on, and the id to resume
        from (-1 at the end). Buffered lines are uploaded first, so a read sees every line appended before it."""
        self.sync()
        first, start = after >> LINE_BITS, after & ((1 << LINE_BITS) - 1)
        seqs = sorted(seq for seq, o in list(self._objects.items()) if seq >= first and not o.fence)
        out: list[AuditEntry] = []
        with ThreadPoolExecutor(max_workers=READ_AHEAD) as pool:
            for at in range(0, len(seqs), READ_AHEAD):
                chunk = seqs[at:at + READ_AHEAD]
                for seq, blob in zip(chunk, pool.map(lambda s: self.store.get(self._key(s)), chunk), strict=True):
                    resume = self._read_object(seq, blob, start=start if seq == first else 0, out=out, limit=limit,
                                               ops=ops, memory_id=memory_id)
                    if resume >= 0:
                        return out, resume
        return out, -1

    def _read_object(self, seq: int, blob: Blob | None, *, start: int, out: list[AuditEntry], limit: int,
                     ops: frozenset[AuditOp], memory_id: str) -> int:
        if blob is None:
            return -1   # expired while read
        header, body = decode_object(blob.body)
        if header.get("kind") != "lines":
            return -1
        for index, raw in enumerate(_lines(body)):
            if index < start:
                continue
            entry = parse_line((seq << LINE_BITS) | index, raw)
            if entry is None or not entry_matches(entry, ops=ops, memory_id=memory_id):
                continue
            out.append(entry)
            if len(out) >= limit:
                return (seq << LINE_BITS) | (index + 1)
        return -1

    def lines(self) -> list[dict[str, Any]]:
        """Every line, oldest first, as JSON (tests and tools; reads every object)."""
        self.sync()
        out: list[dict[str, Any]] = []
        for seq in sorted(self._objects):
            blob = self.store.get(self._key(seq))
            if blob is not None and decode_object(blob.body)[0].get("kind") == "lines":
                out += [json.loads(raw) for raw in _lines(decode_object(blob.body)[1])]
        return out
