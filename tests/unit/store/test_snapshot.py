from __future__ import annotations

from pathlib import Path

import numpy as np

from server.store.snapshot import read_snapshot, write_snapshot


def test_round_trip_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "x.snap"
    payload = np.arange(1000, dtype=np.uint8)
    write_snapshot(path, {"seq": 3}, payload)
    header, body = read_snapshot(path)  # type: ignore[misc]
    assert header == {"seq": 3} and np.array_equal(body, payload)
    write_snapshot(path, {"seq": 4}, b"abc")
    header, body = read_snapshot(path)  # type: ignore[misc]
    assert header["seq"] == 4 and body.tobytes() == b"abc"
    assert not (tmp_path / "x.snap.tmp").exists()


def test_missing_torn_or_corrupt_reads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "x.snap"
    assert read_snapshot(path) is None
    write_snapshot(path, {"seq": 1}, np.ones(4096, dtype=np.uint8))
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    assert read_snapshot(path) is None
    flipped = bytearray(data)
    flipped[-100] ^= 1
    path.write_bytes(bytes(flipped))
    assert read_snapshot(path) is None
    path.write_bytes(b"garbage")
    assert read_snapshot(path) is None


def test_a_leftover_temp_file_does_not_shadow_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "x.snap"
    write_snapshot(path, {"seq": 1}, b"good")
    (tmp_path / "x.snap.tmp").write_bytes(b"half written")   # a crash mid-write
    header, body = read_snapshot(path)  # type: ignore[misc]
    assert header["seq"] == 1 and body.tobytes() == b"good"
