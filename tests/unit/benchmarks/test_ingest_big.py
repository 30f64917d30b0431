"""benchmarks/ingest/big.py and big_report.py: a build's memories are a pure function of their index (so a stopped
build resumes with the same Writes), distinct and numbered (none merges); the report reads the gate's pauses and
the tenant's index builds."""

from __future__ import annotations

import datetime as dt
import statistics
from pathlib import Path

from benchmarks.ingest.big import short_memory
from benchmarks.ingest.big_report import _overlaps, building_spans, paused_spans
from server.engine.write import _NUMBER_RE


def test_short_memories_are_pure_distinct_numbered_and_locomo_sized() -> None:
    first = [short_memory(i) for i in range(5000)]
    assert first == [short_memory(i) for i in range(5000)] and len(set(first)) == 5000
    assert all(str(i) in _NUMBER_RE.findall(m) for i, m in enumerate(first))   # a number of its own: never merged
    assert 90 <= statistics.mean(map(len, first)) <= 150


def test_pauses_and_index_builds_are_read_back(tmp_path: Path) -> None:
    log = tmp_path / "gate.log"
    log.write_text("10:00:00 paused\n10:05:00 resumed\n10:06:00 paused\n10:06:30 paused\n10:07:00 resumed\n")
    day = dt.date(2026, 12, 3)
    spans = paused_spans(log, day=day)
    start = dt.datetime(2026, 12, 3, 10, tzinfo=dt.timezone.utc).timestamp()
    assert spans == [(start, start + 300), (start + 360, start + 420)]
    assert _overlaps(start + 290, start + 310, spans) and not _overlaps(start + 320, start + 340, spans)
    rows = [{"wall": str(t), "memories": str(m), "state": s, "dense_index": i} for t, m, s, i in (
        (0, 19000, "LOADED", "IDMap2,Flat"), (5, 20100, "BUILDING", "IDMap2,Flat"),
        (10, 20600, "LOADED", "IVF512_HNSW32,SQ8"), (15, 82000, "BUILDING", "IVF512_HNSW32,SQ8"))]
    builds = building_spans(rows)
    assert builds[0] == {"start": 5.0, "memories_at_start": 20100, "index_before": "IDMap2,Flat", "end": 10.0,
                         "memories_at_end": 20600, "index_after": "IVF512_HNSW32,SQ8"}
    assert builds[1]["start"] == 15.0 and builds[1]["index_after"] == ""   # still building at the last row


def test_pauses_past_midnight_are_on_the_next_day(tmp_path: Path) -> None:
    log = tmp_path / "gate.log"
    log.write_text("23:50:00 paused\n00:10:00 resumed\n01:00:00 paused\n01:00:30 resumed\n")
    start = dt.datetime(2026, 12, 3, 23, 50, tzinfo=dt.timezone.utc).timestamp()
    assert paused_spans(log, day=dt.date(2026, 12, 3)) == [(start, start + 1200), (start + 4200, start + 4230)]
