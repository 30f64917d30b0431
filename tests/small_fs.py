"""A small real filesystem for disk-full tests: a tmpfs mounted at a temp path (root only). Tests that need
one skip, saying why, where mounting is not permitted."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_filesystem(path: Path, *, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a disk-full test mounts a small tmpfs, which needs root (run as root, or in the container)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, *, leave_bytes: int = 0) -> Path:
    """Writes a filler file until the filesystem under ``path`` has at most ``leave_bytes`` free."""
    filler = path / "filler.bin"
    chunk = b"\0" * (64 << 10)
    with open(filler, "ab") as f:
        while True:
            st = os.statvfs(path)
            free = st.f_bavail * st.f_frsize
            if free <= leave_bytes:
                break
            try:
                f.write(chunk[:max(4096, min(len(chunk), free - leave_bytes))])
                f.flush()
            except OSError:
                break
    return filler
