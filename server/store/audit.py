"""A tenant's audit log: append-only JSON-lines segments in the tenant's directory.

Every write, merge, supersede, confirm, archive, expiry, delete and search is one line, naming the
memories involved and the conversations behind them (their ``source_refs``), so any answer can be traced
back. Lines never hold memory content (a purge leaves none behind here); a search line holds its query.

Segments are ``audit-<n>-<YYYYMMDD>.log``: a new one starts when the UTC day changes or the current one
reaches ``segment_bytes``. Retention drops whole segments: one whose last line (its mtime) is older than
``retention_s``, then the oldest ones while the tenant's segments exceed ``max_bytes`` (never the one
being written). A purge of the tenant removes its directory, segments included. The single
``audit.log`` of older versions becomes segment 0 on first open.

Each line is written with one ``os.write`` on an ``O_APPEND`` descriptor, so concurrent appenders (a
shard reloaded while an old handle is still open) never interleave inside a line. ``sync`` fsyncs
(the periodic flush and close call it); a torn last line after a crash is skipped on read. An entry's id
is ``segment << 40 | byte offset`` (segment 0: the offset, as before), which is also the page token.
A line that meets a full disk is cut back off the file and kept in memory (at most ``MAX_PENDING``
lines) until a later append or sync finds space: the change it records is already durable.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from pathlib import Path

from server.domain import AuditEntry, AuditOp, AuditRef
from server.errors import is_storage_full

log = logging.getLogger(__name__)

LEGACY_FILE = "audit.log"
MAX_QUERY_CHARS = 512
MAX_PENDING = 10000
SEGMENT_SHIFT = 40
_READ_CHUNK = 1 << 20
_SEGMENT_RE = re.compile(r"^audit-(\d{6,})-(\d{8})\.log$")


def _ref_json(ref: AuditRef) -> dict:
    out: dict = {"id": ref.memory_id}
    if ref.source_refs:
        out["src"] = list(ref.source_refs)
    if ref.related_id:
        out["rel"] = ref.related_id
    return out


def _entry_from_json(entry_id: int, d: dict) -> AuditEntry:
    refs = tuple(AuditRef(memory_id=r["id"], source_refs=tuple(r.get("src", ())), related_id=r.get("rel", ""))
                 for r in d.get("refs", ()))
    return AuditEntry(entry_id=entry_id, at_ms=int(d["at"]), op=AuditOp(d["op"]), refs=refs, query=d.get("q", ""),
                      key_id=d.get("key", ""), note=d.get("note", ""))


def encode_line(op: AuditOp, refs: Iterable[AuditRef], *, at_ms: int, key_id: str = "", query: str = "",
                note: str = "", extra: dict | None = None) -> bytes:
    """One audit line (JSON and a newline), as a segment file and an audit object in a bucket hold it."""
    record: dict = {"at": at_ms, "op": int(op), "refs": [_ref_json(r) for r in refs]}
    if query:
        record["q"] = query[:MAX_QUERY_CHARS]
    if key_id:
        record["key"] = key_id
    if note:
        record["note"] = note
    if extra:
        record.update(extra)
    return (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


# The Write being committed on this thread: its line's fields beyond the memories ({"key", "at"}).
_WRITE_LINE: ContextVar[dict[str, Any] | None] = ContextVar("engram_write_line", default=None)


@contextmanager
def writing(*, key_id: str, at_ms: int) -> Iterator[None]:
    """Commits made inside are a Write's by ``key_id`` at ``at_ms`` (the time its WRITE line holds). A log in a
    bucket records both in the commit object, so the line can wait for the flush and a next owner rebuilds it
    whole (:mod:`server.store.object_audit`); a local log ignores them (its line is in the page cache)."""
    token = _WRITE_LINE.set({"key": key_id, "at": at_ms})
    try:
        yield
    finally:
        _WRITE_LINE.reset(token)


def write_line() -> dict[str, Any] | None:
    """The fields :func:`writing` set for the commit being made on this thread (None: not a Write's commit)."""
    return _WRITE_LINE.get()


def entry_matches(entry: AuditEntry, *, ops: frozenset[AuditOp], memory_id: str) -> bool:
    if ops and entry.op not in ops:
        return False
    return not memory_id or any(memory_id in (r.memory_id, r.related_id) for r in entry.refs)


def segment_name(number: int, *, at_s: float) -> str:
    return f"audit-{number:06d}-{time.strftime('%Y%m%d', time.gmtime(at_s))}.log"


def segments(directory: Path) -> list[tuple[int, Path]]:
    """The tenant's audit segments, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), directory / name) for name in names if (m := _SEGMENT_RE.match(name))]
    return sorted(found)


def audit_bytes(directory: Path) -> int:
    total = 0
    for _, path in segments(directory):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


def expire_segments(directory: Path, *, now_s: float, retention_s: float, max_bytes: int, keep: int = -1) -> int:
    """Removes segments older than ``retention_s`` (0: none), then the oldest while the rest exceed
    ``max_bytes`` (0: no cap); segment ``keep`` (the one being written; -1: the newest) always stays.
    Returns how many were removed."""
    found = segments(directory)
    if not found:
        return 0
    keep = found[-1][0] if keep < 0 else keep
    sized: list[tuple[int, Path, int, float]] = []
    for number, path in found:
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        sized.append((number, path, st.st_size, st.st_mtime))
    doomed = {number for number, _, _, mtime in sized
              if retention_s > 0 and number != keep and mtime < now_s - retention_s}
    total = sum(size for number, _, size, _ in sized if number not in doomed)
    for number, _, size, _ in sized:
        if max_bytes <= 0 or total <= max_bytes:
            break
        if number != keep and number not in doomed:
            doomed.add(number)
            total -= size
    for number, path, _, _ in sized:
        if number in doomed:
            path.unlink(missing_ok=True)
            log.info("audit: segment %s expired", path.name)
    return len(doomed)


# A segment rotates at this size or when the UTC day changes; retention removes whole segments, so several fit
# under a tenant's memory.audit_max_mb (AuditLog caps a segment at a quarter of it).
AUDIT_SEGMENT_BYTES = 64 << 20


@dataclass(frozen=True)
class AuditPolicy:
    """How a tenant's audit log rotates and expires (``memory.audit_*``); ``open`` makes the shard's log."""

    retention_s: float = 0.0
    max_bytes: int = 0
    segment_bytes: int = AUDIT_SEGMENT_BYTES

    def open(self, directory: Path, *, log: object = None) -> AuditLog:
        """The tenant's audit log: beside its memory log when that lives in a bucket (``log`` has
        ``open_audit``: :class:`server.store.object_audit.BucketAuditLog`), else segment files in ``directory``."""
        open_audit = getattr(log, "open_audit", None)
        if open_audit is not None:
            return open_audit(directory, retention_s=self.retention_s, max_bytes=self.max_bytes)  # type: ignore[no-any-return]
        return AuditLog(directory, retention_s=self.retention_s, max_bytes=self.max_bytes,
                        segment_bytes=self.segment_bytes)

    def expire(self, directory: Path, *, now_s: float) -> int:
        """Retention for a tenant whose log is not open (not loaded): its newest segment is kept."""
        return expire_segments(directory, now_s=now_s, retention_s=self.retention_s, max_bytes=self.max_bytes)


class AuditLog:
    def __init__(self, directory: Path, *, retention_s: float = 0.0, max_bytes: int = 0,
                 segment_bytes: int = 64 << 20, clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self.retention_s = retention_s
        self.max_bytes = max_bytes
        # several segments fit under the cap, so expiring the oldest keeps most of the history
        self.segment_bytes = max(1 << 16, min(segment_bytes, max_bytes // 4) if max_bytes else segment_bytes)
        self._clock = clock
        self._lock = threading.Lock()
        self._fd = -1
        self._segment = -1
        self._day = ""
        self._size = 0
        self._dirty = False
        self._pending: deque[bytes] = deque(maxlen=MAX_PENDING)
        self.lost_lines = 0
        legacy = directory / LEGACY_FILE
        if legacy.exists() and not segments(directory):
            os.replace(legacy, directory / segment_name(0, at_s=legacy.stat().st_mtime))

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._segment = -1, -1

    def _current(self) -> int:
        """The descriptor to append to, rotating to a new segment on a new UTC day or at the size cap."""
        now = self._clock()
        day = time.strftime("%Y%m%d", time.gmtime(now))
        if self._fd >= 0 and day == self._day and self._size < self.segment_bytes:
            return self._fd
        found = segments(self.directory)
        self._close_fd()
        number, path = found[-1] if found else (0, self.directory / segment_name(0, at_s=now))
        if found and (not path.name.endswith(f"-{day}.log") or path.stat().st_size >= self.segment_bytes):
            number, path = number + 1, self.directory / segment_name(number + 1, at_s=now)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._segment, self._day, self._size = number, day, os.fstat(self._fd).st_size
        return self._fd

    def _write_locked(self, line: bytes) -> bool:
        fd = self._current()
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)   # no torn line for the next one to follow
            if not is_storage_full(exc):
                raise
            return False
        self._size += len(line)
        self._dirty = True
        return True

    def _drain_pending_locked(self) -> bool:
        while self._pending:
            if not self._write_locked(self._pending[0]):
                return False
            self._pending.popleft()
        return True

    def append(self, op: AuditOp, refs: Iterable[AuditRef], *, at_ms: int, key_id: str = "", query: str = "",
               note: str = "") -> None:
        line = encode_line(op, refs, at_ms=at_ms, key_id=key_id, query=query, note=note)
        with self._lock:
            if self._drain_pending_locked() and self._write_locked(line):
                return
            if len(self._pending) == self._pending.maxlen:
                self.lost_lines += 1
            self._pending.append(line)

    def sync(self) -> None:
        with self._lock:
            self._drain_pending_locked()
            if self._fd >= 0 and self._dirty:
                os.fsync(self._fd)
                self._dirty = False

    def maintain(self) -> int:
        """Applies retention (see the module docstring); returns how many segments were removed."""
        with self._lock:
            removed = expire_segments(self.directory, now_s=self._clock(), retention_s=self.retention_s,
                                      max_bytes=self.max_bytes, keep=self._segment)
            if self._segment >= 0 and not any(n == self._segment for n, _ in segments(self.directory)):
                self._close_fd()
            return removed

    def size_bytes(self) -> int:
        return audit_bytes(self.directory)

    def close(self) -> None:
        self.sync()
        with self._lock:
            self._close_fd()

    def read(self, *, after: int, limit: int, ops: frozenset[AuditOp] = frozenset(),
             memory_id: str = "") -> tuple[list[AuditEntry], int]:
        """Up to ``limit`` entries from entry id ``after`` on, across segments (an expired position resumes at
        the oldest segment kept), that match; returns them and the id to resume from (-1 at the end)."""
        out: list[AuditEntry] = []
        first, start = after >> SEGMENT_SHIFT, after & ((1 << SEGMENT_SHIFT) - 1)
        for number, path in segments(self.directory):
            if number < first:
                continue
            resume = _read_segment(path, number=number, start=start if number == first else 0, out=out,
                                   limit=limit, ops=ops, memory_id=memory_id)
            if resume >= 0:
                return out, resume
        return out, -1


def _read_segment(path: Path, *, number: int, start: int, out: list[AuditEntry], limit: int,
                  ops: frozenset[AuditOp], memory_id: str) -> int:
    """Appends this segment's matching entries from byte ``start`` to ``out``; returns the id to resume from
    once ``limit`` is reached, else -1."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return -1   # expired while read
    base = number << SEGMENT_SHIFT
    with f:
        offset = start
        f.seek(offset)
        buf = b""
        while True:
            chunk = f.read(_READ_CHUNK)
            buf += chunk
            lines = buf.split(b"\n")
            buf = lines.pop()          # an incomplete tail (or b"")
            for raw in lines:
                here = offset
                offset += len(raw) + 1
                entry = parse_line(base | here, raw)
                if entry is None or not entry_matches(entry, ops=ops, memory_id=memory_id):
                    continue
                out.append(entry)
                if len(out) >= limit:
                    return base | offset
            if not chunk:
                return -1


def parse_line(offset: int, raw: bytes) -> AuditEntry | None:
    try:
        return _entry_from_json(offset, json.loads(raw))
    except (ValueError, KeyError, TypeError):
        log.warning("audit log: skipping an unreadable line at offset %d", offset)
        return None


def refs_of(memories: Sequence[object], *, related: str = "") -> list[AuditRef]:
    """AuditRefs for memories (anything with ``memory_id`` and ``source_refs``)."""
    return [AuditRef(memory_id=m.memory_id, source_refs=tuple(m.source_refs), related_id=related)  # type: ignore[attr-defined]
            for m in memories]
