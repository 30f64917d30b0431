"""An append-only write-ahead log with group commit.

Each record is ``[u32 meta_len][u32 blob_len][u32 crc32][meta JSON][blob]``. ``append`` writes a group of
records and fsyncs once before returning, so a caller that acknowledges after ``append`` never loses an
acknowledged record. ``open`` stops at the first torn or corrupt record (a crash mid-append) or at the
start of a group that never finished, and cuts the file there, so a half-written group is never
half-applied on the next start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<III")
_GROUP_KEY = "_g"  # in each appended record: how many records of its group follow it

_COPY_CHUNK = 8 << 20

Record = tuple[dict[str, Any], bytes]


def _tmp_of(path: Path) -> Path:
    return path.with_suffix(".tmp")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _finite(value: dict[str, Any] | list[Any] | tuple[Any, ...]) -> bool:
    """Whether no float in ``value`` (a record's meta: dicts, lists and scalars) is NaN or infinite. Scalars are
    checked in the loop, not by a call each (a put's meta: ~2 us)."""
    for v in value.values() if type(value) is dict else value:
        t = type(v)
        if t is float:
            if v - v != 0.0:   # NaN and infinities
                return False
        elif t is dict or t is list or t is tuple:
            if not _finite(v):
                return False
        elif t is not str and t is not int and t is not bool and v is not None:
            return False   # anything else (a subclass orjson would write as its base): json's way
    return True


def _dumps(meta: dict[str, Any]) -> bytes:
    """A record's meta as JSON: orjson (a tenth of ``json``'s time: 2 against 21 us a put's meta), and ``json`` for
    what orjson would write otherwise or refuses (NaN and infinities, which orjson writes as null; integers past 64
    bits; keys that are not strings), so every meta reads back as ``json`` would have written it."""
    if _finite(meta):
        try:
            return orjson.dumps(meta)
        except orjson.JSONEncodeError:
            pass
    return json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode()


def encode_record(meta: dict[str, Any], blob: bytes = b"") -> bytes:
    meta_bytes = _dumps(meta)
    crc = zlib.crc32(blob, zlib.crc32(meta_bytes))
    return _HEADER.pack(len(meta_bytes), len(blob), crc) + meta_bytes + blob


def _loads(meta: bytes | memoryview) -> dict:
    """A record's meta JSON: orjson (a 1M-memory log's metas parse ~3x faster than with ``json``), else ``json``
    for what orjson refuses and ``json`` reads (NaN, integers past 64 bits), so both read the same records."""
    try:
        return orjson.loads(meta)
    except orjson.JSONDecodeError:
        return json.loads(bytes(meta))


def _read_records(data: bytes) -> Iterator[tuple[int, Record]]:
    """Yields (end offset, record) for every intact record from the start of ``data``. A record's blob is a
    read-only view of ``data``, not a copy (a put's vectors: 1.5 KB a memory, 1.9 GB for a 1M-memory log, each
    copy page-faulted in anew); a view keeps ``data`` alive while it lives."""
    offset = 0
    view = memoryview(data)
    while offset + _HEADER.size <= len(data):
        meta_len, blob_len, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        end = start + meta_len + blob_len
        if end > len(data):
            return
        meta_bytes = view[start:start + meta_len]
        blob = view[start + meta_len:end]
        if zlib.crc32(blob, zlib.crc32(meta_bytes)) != crc:
            return
        try:
            meta = _loads(meta_bytes)
        except ValueError:
            return
        yield end, (meta, blob)   # type: ignore[misc]  # a bytes-like view: len, ==, frombuffer, + and crc32 read it
        offset = end


def _read_groups(data: bytes) -> Iterator[tuple[int, list[Record]]]:
    """Yields (end offset, records) for every complete group: ``append`` tags each record with how many of
    its group follow it (``_g``), so a group cut short by a crash (a short write on SIGKILL) is never
    yielded in part. Records without the tag (``rewrite``, older logs) are groups of one."""
    group: list[Record] = []
    expected: int | None = None
    for end, (meta, blob) in _read_records(data):
        remaining = int(meta.pop(_GROUP_KEY, 0))
        if expected is not None and remaining != expected:
            return  # a group that never finished, followed by something else: stop at its start
        group.append((meta, blob))
        if remaining == 0:
            yield end, group
            group, expected = [], None
        else:
            expected = remaining - 1


def encode_group(records: Sequence[Record]) -> bytes:
    """The bytes ``append`` writes for one group: each record tagged with how many of its group follow it."""
    last = len(records) - 1
    return b"".join(encode_record({**meta, _GROUP_KEY: last - i}, blob) for i, (meta, blob) in enumerate(records))


def parse_records(data: bytes) -> list[Record]:
    """Every record of the complete groups in ``data`` (log bytes: a file's, or an object's)."""
    return [record for _, group in _read_groups(data) for record in group]


def read_records(path: Path, *, upto: int | None = None) -> list[Record]:
    """Every record of the complete groups of the log at ``path`` (its first ``upto`` bytes when given),
    read-only (a compaction reads vectors back with it)."""
    with open(path, "rb") as f:
        data = f.read() if upto is None else f.read(upto)
    return parse_records(data)


class WriteAheadLog:
    def __init__(self, path: Path, *, sync: bool = True) -> None:
        """``sync=False``: appends are not fsynced (a cache that its owner rewrites from the source of truth on
        every open: server/store/object_wal.py); compactions of it still are."""
        self.path = path
        self._sync = sync
        self._lock = threading.Lock()
        # An unbuffered descriptor: after a failed write (ENOSPC) no buffer keeps the rest of the group to
        # flush in front of the next one; the size is ours, not a buffered position.
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size

    @classmethod
    def open(cls, path: Path, *, each: Callable[[dict, bytes], None] | None = None
             ) -> tuple[WriteAheadLog, list[Record]]:
        """Opens (creating) the log and returns it with every intact record, cutting a torn tail.

        ``each``: called with every record of every complete group in order instead (the list returned is then
        empty), so a replay holds one group's metas at a time rather than the whole log's: a 1M-memory tenant's
        log is 2.2 GB, and its metas as dicts alone about as much again."""
        path.parent.mkdir(parents=True, exist_ok=True)
        _tmp_of(path).unlink(missing_ok=True)   # a compaction cut short by a crash: the log itself is intact
        records: list[Record] = []
        good_end = 0
        if path.exists():
            data = path.read_bytes()
            for end, group in _read_groups(data):
                if each is None:
                    records.extend(group)
                else:
                    for meta, blob in group:
                        each(meta, blob)
                good_end = end
            if good_end != len(data):
                log.warning("wal %s: cutting %d torn bytes at offset %d", path, len(data) - good_end, good_end)
                with open(path, "r+b") as f:
                    f.truncate(good_end)
                    f.flush()
                    os.fsync(f.fileno())
        else:
            path.touch()
            fsync_dir(path.parent)
        return cls(path), records

    def append(self, records: Sequence[Record]) -> None:
        """Writes the records as one group and fsyncs (unless built with ``sync=False``) before returning."""
        if not records:
            return
        payload = encode_group(records)
        with self._lock:
            start = self._size
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(self._fd, view):]
                if self._sync:
                    os.fsync(self._fd)
            except BaseException:
                # Leave no partial group behind for later groups to follow (e.g. ENOSPC mid-write).
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, start)
                raise
            self._size = start + len(payload)

    def size_bytes(self) -> int:
        with self._lock:
            return self._size

    stores_artefacts = False
    keeps_base_seq = False   # compacted_seq is 0: a compaction writes a base record (TenantStore.base_seq)
    needs_reload = False   # a failed fsync raises; the file never needs reopening to know its state

    def take_artefacts(self) -> dict[str, bytes]:
        return {}

    @property
    def compacted_seq(self) -> int:
        """0: the file's compacted base starts with its own seq (TenantStore.base_seq), which the loaders check
        the index caches against (a compaction whose Lucene commit was skipped or failed)."""
        return 0

    def read(self, *, upto: int | None = None) -> list[Record]:
        """Every record of the log's complete groups (its first ``upto`` bytes when given), read back."""
        return read_records(self.path, upto=upto)

    def write_replacement(self, records: Sequence[Record], *, upto: int | None = None,
                          artefacts: Mapping[str, bytes] | None = None) -> Path:
        """Writes ``records`` to the log's temp file and fsyncs it; the live log is untouched (appends may
        go on meanwhile). On any failure (ENOSPC) the temp file is removed and the error raised. ``upto``
        (the log's size the records stand for) is what a remote log needs; a file has its own (``publish``).
        ``artefacts``: not kept here (:attr:`stores_artefacts` is False: the index caches sit beside the file)."""
        tmp = _tmp_of(self.path)
        try:
            with open(tmp, "wb") as f:
                f.writelines(encode_record(meta, blob) for meta, blob in records)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp

    def publish(self, tmp: Path, *, tail_from: int | None) -> int:
        """Appends the live log's bytes from ``tail_from`` (what was appended since the replacement's
        snapshot; None: nothing) to ``tmp``, fsyncs, and swaps it in with ``os.replace``: a crash at any
        point leaves the old log or the new one, both complete. Returns the new log's size. The caller
        keeps appends out (holds the store's lock) for the copy and the swap."""
        with self._lock:
            try:
                with open(tmp, "ab") as out:
                    if tail_from is not None:
                        with open(self.path, "rb") as src:
                            src.seek(tail_from)
                            while chunk := src.read(_COPY_CHUNK):
                                out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            os.close(self._fd)
            self._fd = -1
            try:
                os.replace(tmp, self.path)
                fsync_dir(self.path.parent)
            finally:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
                self._size = os.fstat(self._fd).st_size
            return self._size

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                try:
                    os.fsync(self._fd)
                finally:
                    os.close(self._fd)
                    self._fd = -1
