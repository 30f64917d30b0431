"""A group appended to the WAL is all-or-nothing on replay, even when a crash leaves a prefix of it on disk
(Linux may complete only part of a write() when the process is SIGKILLed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.store.wal import WriteAheadLog, encode_record, read_records

FIRST = [({"op": "put", "n": 1}, b"v1")]
GROUP = [({"op": "put", "n": 2}, b"v2"), ({"op": "put", "n": 3}, b"v3"), ({"op": "del", "ids": ["a"]}, b"")]


def _write(path: Path) -> tuple[int, int]:
    """Appends FIRST then GROUP; returns (end of FIRST, end of GROUP's first record)."""
    wal, _ = WriteAheadLog.open(path)
    wal.append(FIRST)
    first_end = path.stat().st_size
    wal.append(GROUP)
    wal.close()
    one_record = len(encode_record({**GROUP[0][0], "_g": 2}, GROUP[0][1]))
    return first_end, first_end + one_record


@pytest.mark.parametrize("cut", ["inside the second record", "after the first record", "inside the last byte"])
def test_a_group_cut_short_is_dropped_whole(tmp_path: Path, cut: str) -> None:
    path = tmp_path / "x.wal"
    first_end, after_one = _write(path)
    size = path.stat().st_size
    keep = {"inside the second record": after_one + 7, "after the first record": after_one,
            "inside the last byte": size - 1}[cut]
    with open(path, "r+b") as f:
        f.truncate(keep)
    wal, records = WriteAheadLog.open(path)
    assert records == FIRST
    assert path.stat().st_size == first_end  # cut at the start of the unfinished group
    wal.append(GROUP)
    wal.close()
    assert WriteAheadLog.open(path)[1] == FIRST + GROUP
    assert read_records(path) == FIRST + GROUP


def test_complete_groups_replay_without_the_group_tag(tmp_path: Path) -> None:
    path = tmp_path / "x.wal"
    _write(path)
    wal, records = WriteAheadLog.open(path)
    wal.close()
    assert records == FIRST + GROUP and all("_g" not in meta for meta, _ in records)


def test_untagged_records_are_groups_of_one(tmp_path: Path) -> None:
    path = tmp_path / "x.wal"
    path.write_bytes(b"".join(encode_record(meta, blob) for meta, blob in FIRST + GROUP))
    wal, records = WriteAheadLog.open(path)
    wal.close()
    assert records == FIRST + GROUP
