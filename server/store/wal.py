"""An append-only write-ahead log with group commit.

Each record is ``[u32 meta_len][u32 blob_len][u32 crc32][meta JSON][blob]``. ``append`` writes a group of
records and fsyncs once before returning, so a caller that acknowledges after ``append`` never loses an
acknowledged record. ``replay`` stops at the first torn or corrupt record (a crash mid-append) and cuts
the file there, so a half-written group is never half-applied on the next start.
"""

from __future__ import annotations

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


def read_records(path: Path) -> list[Record]:
    """Every intact record of the log at ``path``, read-only (a compaction reads vectors back with it)."""
    return [record for _, record in _read_records(path.read_bytes())]


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
            for end, record in _read_records(data):
                records.append(record)
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
        payload = b"".join(encode_record(meta, blob) for meta, blob in records)
        with self._lock:
            self._file.write(payload)
            self._file.flush()
            os.fsync(self._file.fileno())

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
