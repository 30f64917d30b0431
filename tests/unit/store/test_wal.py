from __future__ import annotations

from pathlib import Path

import numpy as np

from server.domain import Memory, MemoryStatus, MemoryType
from server.store.memory_store import TenantStore
from server.store.wal import WriteAheadLog


def _memory(i: int, **kw: object) -> Memory:
    base = dict(memory_id=f"m_{i}", doc_id=i, content=f"memory {i}", type=MemoryType.SEMANTIC, importance=0.5,
                created_at_ms=1000 + i, last_access_at_ms=1000 + i, access_count=0, entities=("e",), source_ref="s",
                scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                pinned=False, expires_at_ms=0, metadata={"k": "v"}, source_refs=("s",), updated_at_ms=1000 + i)
    base.update(kw)
    return Memory(**base)  # type: ignore[arg-type]


def test_records_round_trip_and_torn_tail_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "x.wal"
    wal, records = WriteAheadLog.open(path)
    assert records == []
    wal.append([({"a": 1}, b"blob"), ({"b": "二"}, b"")])
    wal.append([({"c": 3}, b"\x00" * 10)])
    wal.close()
    good_size = path.stat().st_size
    with open(path, "ab") as f:   # a crash in the middle of the next group
        f.write(b"\x10\x00\x00\x00\x00\x00")
    wal, records = WriteAheadLog.open(path)
    assert [m for m, _ in records] == [{"a": 1}, {"b": "二"}, {"c": 3}]
    assert records[0][1] == b"blob"
    assert path.stat().st_size == good_size
    wal.close()


def test_corrupt_record_stops_replay_there(tmp_path: Path) -> None:
    path = tmp_path / "x.wal"
    wal, _ = WriteAheadLog.open(path)
    wal.append([({"a": 1}, b"")])
    wal.append([({"b": 2}, b"")])
    wal.close()
    data = bytearray(path.read_bytes())
    data[-2] ^= 0xFF   # flip a byte in the second record
    path.write_bytes(bytes(data))
    _, records = WriteAheadLog.open(path)
    assert [m for m, _ in records] == [{"a": 1}]


def test_store_replays_puts_updates_deletes_and_vectors(tmp_path: Path) -> None:
    store, replayed = TenantStore.open(tmp_path, dim=4)
    assert len(store) == 0 and not replayed.vectors
    v = np.arange(4, dtype=np.float32)
    store.commit(puts=[(_memory(1), v), (_memory(2, key="budget", scope="x"), v + 1)])
    store.commit(updates=[_memory(1, status=MemoryStatus.SUPERSEDED)], deletes=["m_2"])
    store.close()
    store, replayed = TenantStore.open(tmp_path, dim=4)
    assert store.get("m_1").status == MemoryStatus.SUPERSEDED  # type: ignore[union-attr]
    assert store.get("m_2") is None and store.by_doc(2) is None
    assert list(replayed.vectors) == [1] and replayed.vectors[1].tolist() == v.tolist()
    assert store.in_slot("budget", "x") == []
    assert store.seq == 2 and store.allocate_doc_ids(1) == [3]
    assert [op[1] for op in replayed.lexical_ops] == ["put", "put", "del"]


def test_metas_only_the_standard_json_reader_reads_are_replayed_too(tmp_path: Path) -> None:
    """Metas are parsed with orjson, which refuses NaN and integers past 64 bits; json.dumps writes both, so a
    log holding them must replay every record, not stop there as at a torn one."""
    path = tmp_path / "x.wal"
    wal, _ = WriteAheadLog.open(path)
    wal.append([({"a": float("nan")}, b"x")])
    wal.append([({"b": 2**70}, b""), ({"c": "ok"}, b"")])
    wal.close()
    _, records = WriteAheadLog.open(path)
    assert len(records) == 3
    assert records[0][0]["a"] != records[0][0]["a"]   # NaN
    assert [m for m, _ in records[1:]] == [{"b": 2**70}, {"c": "ok"}]


def test_open_hands_each_record_of_complete_groups_in_order_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "x.wal"
    wal, _ = WriteAheadLog.open(path)
    wal.append([({"a": 1}, b"v1"), ({"b": 2}, b"")])
    wal.append([({"c": 3}, b"v3")])
    wal.close()
    good_size = path.stat().st_size
    with open(path, "ab") as f:   # a crash in the middle of the next group
        f.write(b"\x10\x00\x00\x00\x00\x00")
    seen: list[tuple[dict, bytes]] = []
    wal, records = WriteAheadLog.open(path, each=lambda meta, blob: seen.append((meta, bytes(blob))))
    assert records == [] and path.stat().st_size == good_size
    assert seen == [({"a": 1}, b"v1"), ({"b": 2}, b""), ({"c": 3}, b"v3")]
    wal.close()


def test_metas_read_back_as_json_wrote_them(tmp_path: Path) -> None:
    """Metas go through orjson where it writes what json would, and through json where it would not (NaN and
    infinities, which orjson writes as null; integers past 64 bits; other key types; subclasses): each reads back
    as the json encoding does."""
    import enum
    import json
    import math

    from server.store.codec import memory_to_json
    from server.store.wal import _loads, encode_record, parse_records

    class Level(enum.IntEnum):
        HIGH = 2

    metas = [
        {"op": "put", "seq": 7, "m": memory_to_json(_memory(3, content="café 二 \u2028 \"q\"", importance=0.1 + 0.2,
                                                                confidence=1e-05, metadata={"k": "v", "n": "1e16"}))},
        {"op": "acc", "seq": 8, "a": [[1, 2.5, 3], [4, 1e16, 6]]},
        {"nan": float("nan"), "inf": [float("inf")], "deep": {"x": {"y": -float("inf")}}},
        {"big": 10 ** 30, "neg": -(10 ** 20)},
        {1: "int key", "t": (1, 2.0)},
        {"level": Level.HIGH, "share": np.float64(0.25)},
    ]
    for meta in metas:
        back, _ = parse_records(encode_record({**meta, "_g": 0}, b"v"))[0]
        before = json.dumps({**meta, "_g": 0}, separators=(",", ":"), ensure_ascii=False).encode()
        want = _loads(before)   # what the log read back when every meta went through json
        want.pop("_g")
        assert json.dumps(back, sort_keys=True) == json.dumps(want, sort_keys=True)
    nan_back, _ = parse_records(encode_record({"x": float("nan"), "_g": 0}))[0]
    assert math.isnan(nan_back["x"])
