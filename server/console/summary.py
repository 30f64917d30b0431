"""A tenant's summary for the console: counts by type and status, last activity and the memories-over-time
series, computed from the memories a List scan returned. Pure: memories in, a JSON-ready dict out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from server.domain import Memory, MemoryStatus, MemoryType

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
BUCKET_MS = (HOUR_MS, 6 * HOUR_MS, DAY_MS, 7 * DAY_MS, 30 * DAY_MS, 365 * DAY_MS)
MAX_BUCKETS = 48


def bucket_ms(first_ms: int, last_ms: int) -> int:
    """The smallest of BUCKET_MS that spans first..last in at most MAX_BUCKETS buckets."""
    span = max(0, last_ms - first_ms)
    return next((b for b in BUCKET_MS if span // b + 1 <= MAX_BUCKETS), BUCKET_MS[-1])


def timeline(memories: list[Memory]) -> dict[str, Any]:
    """Memories created per bucket (UTC-aligned), by type: ``{"bucket_ms", "starts_ms", "series": {type: counts}}``."""
    types = [t.name for t in MemoryType]
    if not memories:
        return {"bucket_ms": DAY_MS, "starts_ms": [], "series": {t: [] for t in types}}
    created = [m.created_at_ms for m in memories]
    width = bucket_ms(min(created), max(created))
    first = min(created) // width * width
    n = (max(created) - first) // width + 1
    series = {t: [0] * n for t in types}
    for m in memories:
        series[m.type.name][(m.created_at_ms - first) // width] += 1
    return {"bucket_ms": width, "starts_ms": [first + i * width for i in range(n)], "series": series}


def summarize(memories: Iterable[Memory]) -> dict[str, Any]:
    """Counts by type, by status and by both; pinned; the last write, update or access of any memory."""
    listed = list(memories)
    by_type = {t.name: 0 for t in MemoryType}
    by_status = {s.name: 0 for s in MemoryStatus}
    grid = {t.name: {s.name: 0 for s in MemoryStatus} for t in MemoryType}
    last = 0
    for m in listed:
        by_type[m.type.name] += 1
        by_status[m.status.name] += 1
        grid[m.type.name][m.status.name] += 1
        last = max(last, m.created_at_ms, m.updated_at_ms, m.last_access_at_ms)
    return {"total": len(listed), "by_type": by_type, "by_status": by_status, "by_type_status": grid,
            "pinned": sum(1 for m in listed if m.pinned), "last_activity_ms": last, "timeline": timeline(listed)}
