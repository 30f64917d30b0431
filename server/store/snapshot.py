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


def write_snapshot(path: Path, header: dict[str, Any], payload: np.ndarray | bytes) -> int:
    """Atomically replaces ``path`` with ``header`` + ``payload``; returns the bytes written."""
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    body = memoryview(np.ascontiguousarray(payload).view(np.uint8).reshape(-1) if isinstance(payload, np.ndarray)
                      else payload)
    crc = zlib.crc32(head)
    for start in range(0, len(body), _CHUNK):
        crc = zlib.crc32(body[start:start + _CHUNK], crc)
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as f:
        f.write(_HEAD.pack(MAGIC, len(head), len(body), crc))
        f.write(head)
        for start in range(0, len(body), _CHUNK):
            f.write(body[start:start + _CHUNK])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return _HEAD.size + len(head) + len(body)


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
