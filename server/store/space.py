"""Free space of the data directory against a watermark: writes are turned away (RESOURCE_EXHAUSTED
"storage full") while the filesystem has less than ``min_free_bytes`` free, before it is actually full,
and resume by themselves once space returns: every check reads ``statvfs`` afresh, there is no latch.

The watermark is the reserve the background work needs (a compaction writes up to the live log once
more, a Lucene commit its segments) and what lets a Delete or Forget (allowed below the watermark) free
space. A write that still meets ENOSPC / EDQUOT (another process filled the disk) is answered the same
way by the edge (``server.errors.as_client_error``); :meth:`DiskSpace.note_full` counts it.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from server.errors import StorageFull

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpaceReport:
    free_bytes: int
    total_bytes: int
    min_free_bytes: int
    writes_refused: int      # turned away by the watermark or answered "storage full" after ENOSPC
    full_events: int         # ENOSPC / EDQUOT met on a write path (WAL, audit, Lucene, snapshot, compaction)

    @property
    def low(self) -> bool:
        return self.free_bytes < self.min_free_bytes


class DiskSpace:
    def __init__(self, path: Path, *, min_free_bytes: int) -> None:
        self.path = path
        self.min_free_bytes = max(0, int(min_free_bytes))
        self._lock = threading.Lock()
        self._refused = 0
        self._full_events = 0
        self._was_low = False

    def _statvfs(self) -> tuple[int, int]:
        try:
            st = os.statvfs(self.path)
        except OSError:
            return 0, 0
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize

    def free_bytes(self) -> int:
        return self._statvfs()[0]

    def has_room(self, extra_bytes: int = 0) -> bool:
        """True while the filesystem keeps ``extra_bytes`` more than the watermark free."""
        return self.free_bytes() >= self.min_free_bytes + max(0, extra_bytes)

    def check_writable(self) -> None:
        """Raises StorageFull below the watermark (call before any work of a write)."""
        free = self.free_bytes()
        low = free < self.min_free_bytes
        with self._lock:
            if low != self._was_low:
                self._was_low = low
                if low:
                    log.warning("storage: %d bytes free under %s, below the watermark of %d: writes are refused "
                                "until space returns", free, self.path, self.min_free_bytes)
                else:
                    log.warning("storage: %d bytes free again under %s: writes accepted", free, self.path)
            if low:
                self._refused += 1
        if low:
            raise StorageFull(f"storage full: {free} bytes free, below the server's watermark of "
                              f"{self.min_free_bytes} (storage.min_free_mb); the write was not applied "
                              "(retry once space is freed)")

    def note_full(self, *, refused: bool = False) -> None:
        """Counts an ENOSPC / EDQUOT met on a write path (and a refused request, when one was)."""
        with self._lock:
            self._full_events += 1
            self._refused += int(refused)

    def report(self) -> SpaceReport:
        free, total = self._statvfs()
        with self._lock:
            return SpaceReport(free_bytes=free, total_bytes=total, min_free_bytes=self.min_free_bytes,
                               writes_refused=self._refused, full_events=self._full_events)
