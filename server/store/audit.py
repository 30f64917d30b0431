"""A tenant's audit log: one append-only JSON-lines file in the tenant's directory.

Every write, merge, supersede, confirm, archive, expiry, delete and search is one line, naming the
memories involved and the conversations behind them (their ``source_refs``), so any answer can be traced
back. Lines never hold memory content (a purge leaves none behind here); a search line holds its query.

Each line is written with one ``os.write`` on an ``O_APPEND`` descriptor, so concurrent appenders (a
shard reloaded while an old handle is still open) never interleave inside a line. ``sync`` fsyncs
(the periodic flush and close call it); a torn last line after a crash is skipped on read. An entry's id
is its byte offset, which is also the page token.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from server.domain import AuditEntry, AuditOp, AuditRef

log = logging.getLogger(__name__)

AUDIT_FILE = "audit.log"
MAX_QUERY_CHARS = 512
_READ_CHUNK = 1 << 20


def _ref_json(ref: AuditRef) -> dict:
    out: dict = {"id": ref.memory_id}
    if ref.source_refs:
        out["src"] = list(ref.source_refs)
    if ref.related_id:
        out["rel"] = ref.related_id
    return out


def _entry_from_json(offset: int, d: dict) -> AuditEntry:
    refs = tuple(AuditRef(memory_id=r["id"], source_refs=tuple(r.get("src", ())), related_id=r.get("rel", ""))
                 for r in d.get("refs", ()))
    return AuditEntry(entry_id=offset, at_ms=int(d["at"]), op=AuditOp(d["op"]), refs=refs, query=d.get("q", ""),
                      key_id=d.get("key", ""), note=d.get("note", ""))


class AuditLog:
    def __init__(self, directory: Path) -> None:
        self.path = directory / AUDIT_FILE
        self._lock = threading.Lock()
        self._fd = -1
        self._dirty = False

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return self._fd

    def append(self, op: AuditOp, refs: Iterable[AuditRef], *, at_ms: int, key_id: str = "", query: str = "",
               note: str = "") -> None:
        record: dict = {"at": at_ms, "op": int(op), "refs": [_ref_json(r) for r in refs]}
        if query:
            record["q"] = query[:MAX_QUERY_CHARS]
        if key_id:
            record["key"] = key_id
        if note:
            record["note"] = note
        line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._lock:
            os.write(self._open(), line)
            self._dirty = True

    def sync(self) -> None:
        with self._lock:
            if self._fd >= 0 and self._dirty:
                os.fsync(self._fd)
                self._dirty = False

    def close(self) -> None:
        self.sync()
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def read(self, *, after: int, limit: int, ops: frozenset[AuditOp] = frozenset(),
             memory_id: str = "") -> tuple[list[AuditEntry], int]:
        """Up to ``limit`` entries starting at byte offset ``after`` that match; returns them and the offset
        to resume from (-1 at the end of the log)."""
        out: list[AuditEntry] = []
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return out, -1
        with f:
            offset = after
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
                    entry = _parse(here, raw)
                    if entry is None or (ops and entry.op not in ops):
                        continue
                    if memory_id and all(memory_id not in (r.memory_id, r.related_id) for r in entry.refs):
                        continue
                    out.append(entry)
                    if len(out) >= limit:
                        return out, offset
                if not chunk:
                    return out, -1


def _parse(offset: int, raw: bytes) -> AuditEntry | None:
    try:
        return _entry_from_json(offset, json.loads(raw))
    except (ValueError, KeyError, TypeError):
        log.warning("audit log: skipping an unreadable line at offset %d", offset)
        return None


def refs_of(memories: Sequence[object], *, related: str = "") -> list[AuditRef]:
    """AuditRefs for memories (anything with ``memory_id`` and ``source_refs``)."""
    return [AuditRef(memory_id=m.memory_id, source_refs=tuple(m.source_refs), related_id=related)  # type: ignore[attr-defined]
            for m in memories]
