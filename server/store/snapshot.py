"""Snapshot files: a JSON header and one binary payload, published atomically.

Layout: ``[8-byte magic][u32 header_len][u64 payload_len][u32 crc32(header + payload)][header][payload]``.
A snapshot is written to ``<name>.tmp``, fsynced, then ``os.replace``d over ``<name>`` and the directory
fsynced, so a reader sees the old snapshot or the new one, never half of one. A missing, torn or corrupt
file reads as ``None``: the caller rebuilds from the store, which is always the source of truth.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from server.store.wal import fsync_dir

log = logging.getLogger(__name__)

MAGIC = b"ENGSNAP1"
_HEAD = struct.Struct("<8sIQI")
_CHUNK = 64 << 20


def _framed(header: dict[str, Any], payload: np.ndarray | bytes) -> list[bytes | memoryview]:
    """The snapshot's bytes in parts: fixed head, JSON header, then the payload in chunks."""
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    body = memoryview(np.ascontiguousarray(payload).view(np.uint8).reshape(-1) if isinstance(payload, np.ndarray)
                      else payload)
    crc = zlib.crc32(head)
    for start in range(0, len(body), _CHUNK):
        crc = zlib.crc32(body[start:start + _CHUNK], crc)
    return [_HEAD.pack(MAGIC, len(head), len(body), crc), head,
            *(body[start:start + _CHUNK] for start in range(0, len(body), _CHUNK))]


def _publish(path: Path, parts: list[bytes | memoryview]) -> int:
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as f:
        f.writelines(parts)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return sum(len(p) for p in parts)


def write_snapshot(path: Path, header: dict[str, Any], payload: np.ndarray | bytes) -> int:
    """Atomically replaces ``path`` with ``header`` + ``payload``; returns the bytes written."""
    return _publish(path, _framed(header, payload))


def snapshot_bytes(header: dict[str, Any], payload: np.ndarray | bytes) -> bytes:
    """What :func:`write_snapshot` would write, in memory (a compaction's artefact in object storage)."""
    return b"".join(_framed(header, payload))


def install_snapshot(path: Path, data: bytes) -> int:
    """Atomically replaces ``path`` with snapshot bytes made by :func:`snapshot_bytes` (checked when read)."""
    return _publish(path, [data])


def snapshot_header(data: bytes | Path) -> dict[str, Any] | None:
    """The JSON header of a snapshot (bytes or a file), read without its payload; None when unreadable."""
    try:
        if isinstance(data, Path):
            with open(data, "rb") as f:
                raw = f.read(_HEAD.size)
                magic, head_len, _, _ = _HEAD.unpack(raw)
                head = f.read(head_len)
        else:
            magic, head_len, _, _ = _HEAD.unpack(data[:_HEAD.size])
            head = data[_HEAD.size:_HEAD.size + head_len]
        if magic != MAGIC or len(head) != head_len:
            return None
        return dict(json.loads(head))
    except (OSError, ValueError, struct.error):
        return None


def read_snapshot(path: Path) -> tuple[dict[str, Any], np.ndarray] | None:
    """``(header, payload as uint8 array)``, or None when the file is missing, torn or corrupt."""
    try:
        with open(path, "rb") as f:
            raw = f.read(_HEAD.size)
            if len(raw) < _HEAD.size:
                raise ValueError("short header")
            magic, head_len, body_len, crc = _HEAD.unpack(raw)
            if magic != MAGIC:
                raise ValueError("bad magic")
            head = f.read(head_len)
            body = np.empty(body_len, dtype=np.uint8)
            if f.readinto(memoryview(body)) != body_len or len(head) != head_len:
                raise ValueError("torn file")
        check = zlib.crc32(head)
        view = memoryview(body)
        for start in range(0, body_len, _CHUNK):
            check = zlib.crc32(view[start:start + _CHUNK], check)
        if check != crc:
            raise ValueError("checksum mismatch")
        return json.loads(head), body
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("snapshot %s unusable (%s); it will be rebuilt", path, exc)
        return None
