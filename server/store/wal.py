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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<III")
_GROUP_KEY = "_g"  # in each appended record: how many records of its group follow it

Record = tuple[dict[str, Any], bytes]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def encode_record(meta: dict[str, Any], blob: bytes = b"") -> bytes:
    meta_bytes = json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode()
    crc = zlib.crc32(blob, zlib.crc32(meta_bytes))
    return _HEADER.pack(len(meta_bytes), len(blob), crc) + meta_bytes + blob


def _read_records(data: bytes) -> Iterator[tuple[int, Record]]:
    """Yields (end offset, record) for every intact record from the start of ``data``."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        meta_len, blob_len, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        end = start + meta_len + blob_len
        if end > len(data):
            return
        meta_bytes = data[start:start + meta_len]
        blob = data[start + meta_len:end]
        if zlib.crc32(blob, zlib.crc32(meta_bytes)) != crc:
            return
        try:
            meta = json.loads(meta_bytes)
        except ValueError:
            return
        yield end, (meta, bytes(blob))
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


def read_records(path: Path) -> list[Record]:
    """Every record of the complete groups of the log at ``path``, read-only (a compaction reads vectors
    back with it)."""
    return [record for _, group in _read_groups(path.read_bytes()) for record in group]


class WriteAheadLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file = open(path, "ab")  # noqa: SIM115 - held open for the log's lifetime

    @classmethod
    def open(cls, path: Path) -> tuple[WriteAheadLog, list[Record]]:
        """Opens (creating) the log and returns it with every intact record, cutting a torn tail."""
        path.parent.mkdir(parents=True, exist_ok=True)
        records: list[Record] = []
        good_end = 0
        if path.exists():
            data = path.read_bytes()
            for end, group in _read_groups(data):
                records.extend(group)
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
        """Writes the records as one group and fsyncs before returning."""
        if not records:
            return
        last = len(records) - 1
        payload = b"".join(encode_record({**meta, _GROUP_KEY: last - i}, blob)
                           for i, (meta, blob) in enumerate(records))
        with self._lock:
            start = self._file.tell()
            try:
                self._file.write(payload)
                self._file.flush()
                os.fsync(self._file.fileno())
            except BaseException:
                # Leave no partial group behind for later groups to follow (e.g. ENOSPC mid-write).
                with contextlib.suppress(OSError):
                    os.ftruncate(self._file.fileno(), start)
                raise

    def size_bytes(self) -> int:
        with self._lock:
            return self._file.tell()

    def rewrite(self, records: Sequence[Record]) -> None:
        """Replaces the whole log with ``records`` atomically (temp file, fsync, os.replace)."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            for meta, blob in records:
                f.write(encode_record(meta, blob))
            f.flush()
            os.fsync(f.fileno())
        with self._lock:
            self._file.close()
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
            self._file = open(self.path, "ab")  # noqa: SIM115

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
