"""Disk-full handling below the edge: the error classification, the watermark, and the WAL and audit log on a
real full filesystem (a small tmpfs)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from small_fs import fill, small_filesystem

from server.domain import AuditOp, AuditRef
from server.errors import StorageFull, as_client_error, is_storage_full, status_code_name
from server.store.audit import AuditLog
from server.store.space import DiskSpace
from server.store.wal import WriteAheadLog


class JavaLikeError(Exception):
    pass


def test_storage_full_is_recognised_in_any_layer() -> None:
    assert is_storage_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_storage_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_storage_full(JavaLikeError("JVM exception occurred: java.io.IOException: No space left on device"))
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("append failed") from inner
    except RuntimeError as chained:
        assert is_storage_full(chained)
    assert not is_storage_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_storage_full(ValueError("bad"))
    known = as_client_error(OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(known, StorageFull) and status_code_name(known) == "RESOURCE_EXHAUSTED"
    assert "storage full" in str(known)
    assert as_client_error(ValueError("x")) is None


def test_watermark_refuses_then_accepts(tmp_path: Path) -> None:
    space = DiskSpace(tmp_path, min_free_bytes=1 << 62)   # more than any disk: always below
    with pytest.raises(StorageFull, match="storage full"):
        space.check_writable()
    assert space.report().low and space.report().writes_refused == 1
    space.min_free_bytes = 0
    space.check_writable()
    assert not space.report().low and space.report().free_bytes > 0


def test_wal_on_a_full_disk_keeps_no_partial_group_and_resumes(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", size_mb=2) as fs:
        wal, _ = WriteAheadLog.open(fs / "m.wal")
        wal.append([({"op": "put", "n": 0}, b"v" * 1000)])
        filler = fill(fs, leave_bytes=20_000)
        big = [({"op": "put", "n": i}, b"v" * 8000) for i in range(1, 6)]   # 40 kB: cannot fit
        with pytest.raises(OSError) as caught:
            wal.append(big)
        assert is_storage_full(caught.value)
        assert wal.size_bytes() == (fs / "m.wal").stat().st_size   # cut back to the last whole group
        filler.unlink()
        wal.append(big)   # space returned: the same writer goes on
        wal.close()
        _, records = WriteAheadLog.open(fs / "m.wal")
        assert [m["n"] for m, _ in records] == [0, 1, 2, 3, 4, 5]


def test_audit_lines_that_meet_a_full_disk_wait_in_memory(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", size_mb=2) as fs:
        audit = AuditLog(fs)
        audit.append(AuditOp.WRITE, [AuditRef(memory_id="m_first")], at_ms=1)
        audit.sync()
        filler = fill(fs)
        for i in range(50):   # no exception: the changes they record are already durable
            audit.append(AuditOp.WRITE, [AuditRef(memory_id=f"m_{i:03d}" + "x" * 200)], at_ms=2 + i)
        entries, _ = audit.read(after=0, limit=1000)
        assert 1 <= len(entries) < 51   # the file's last page held a few; the rest wait
        raw = b"".join(p.read_bytes() for p in sorted(fs.glob("audit-*.log")))
        assert raw.endswith(b"\n") and raw.count(b"\n") == len(entries)   # no torn line reached the file
        filler.unlink()
        audit.sync()
        entries, _ = audit.read(after=0, limit=1000)
        assert len(entries) == 51 and entries[-1].refs[0].memory_id.startswith("m_049")
        assert [e.at_ms for e in entries] == sorted(e.at_ms for e in entries)
