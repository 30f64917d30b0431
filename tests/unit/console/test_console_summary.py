"""The tenant summary and the memories-over-time buckets."""

from __future__ import annotations

from server.console.summary import DAY_MS, HOUR_MS, bucket_ms, summarize, timeline
from server.domain import Memory, MemoryStatus, MemoryType


def memory(i: int, *, created: int, type_: MemoryType = MemoryType.SEMANTIC,
           status: MemoryStatus = MemoryStatus.ACTIVE, accessed: int = 0, pinned: bool = False) -> Memory:
    return Memory(memory_id=f"m{i}", doc_id=i, content="c", type=type_, importance=0.5, created_at_ms=created,
                  last_access_at_ms=accessed, access_count=0, entities=(), source_ref="", scope="", confidence=1.0,
                  key="", status=status, supersedes=(), superseded_by="", pinned=pinned, expires_at_ms=0,
                  metadata={}, source_refs=(), updated_at_ms=created)


def test_bucket_width_is_the_smallest_that_fits_in_48_buckets() -> None:
    assert bucket_ms(0, 0) == HOUR_MS
    assert bucket_ms(0, 47 * HOUR_MS) == HOUR_MS
    assert bucket_ms(0, 48 * HOUR_MS) == 6 * HOUR_MS
    assert bucket_ms(0, 40 * DAY_MS) == DAY_MS
    assert bucket_ms(0, 200 * DAY_MS) == 7 * DAY_MS
    assert bucket_ms(0, 100 * 365 * DAY_MS) == 365 * DAY_MS


def test_timeline_counts_each_memory_once_in_its_bucket_by_type() -> None:
    start = 1_700_000_000_000 // DAY_MS * DAY_MS
    ms = [memory(0, created=start + 1), memory(1, created=start + 2 * DAY_MS, type_=MemoryType.EPISODIC),
          memory(2, created=start + 2 * DAY_MS + 5), memory(3, created=start + 20 * DAY_MS, type_=MemoryType.PROCEDURAL)]
    tl = timeline(ms)
    assert tl["bucket_ms"] == DAY_MS and tl["starts_ms"][0] == start and len(tl["starts_ms"]) == 21
    assert tl["series"]["SEMANTIC"][0] == 1 and tl["series"]["SEMANTIC"][2] == 1
    assert tl["series"]["EPISODIC"][2] == 1 and tl["series"]["PROCEDURAL"][20] == 1
    assert sum(sum(v) for v in tl["series"].values()) == 4
    assert timeline([])["starts_ms"] == []


def test_summary_counts_by_type_status_and_both_and_finds_the_last_activity() -> None:
    ms = [memory(0, created=10, pinned=True), memory(1, created=20, status=MemoryStatus.PENDING),
          memory(2, created=30, type_=MemoryType.EPISODIC, status=MemoryStatus.SUPERSEDED, accessed=99)]
    s = summarize(ms)
    assert s["total"] == 3 and s["pinned"] == 1 and s["last_activity_ms"] == 99
    assert s["by_type"] == {"EPISODIC": 1, "SEMANTIC": 2, "PROCEDURAL": 0}
    assert s["by_status"]["PENDING"] == 1 and s["by_status"]["ARCHIVED"] == 0
    assert s["by_type_status"]["EPISODIC"]["SUPERSEDED"] == 1 and s["by_type_status"]["SEMANTIC"]["ACTIVE"] == 1
