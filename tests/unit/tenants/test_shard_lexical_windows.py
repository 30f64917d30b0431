"""A long memory's BM25 windows (server/lexical/windows.py) live and die with the memory in a shard: written with
it, replayed after a crash, removed by a delete (replayed after a crash too), absent after a compaction, rebuilt with
a stale lexical index."""

from __future__ import annotations

from pathlib import Path

from server.domain import MemoryInput
from server.engine.write import commit_writes
from server.lexical.windows import windows
from server.tenants.shard import TenantShard
from server.text import memory_text
from tests.unit.tenants.test_shard_snapshot import CFG, builder, crash, load
from tests.unit.tenants.test_shard_snapshot import vectors as unit

__all__ = ["builder"]   # the fixture, used by name
FILLER = "Here is a short overview of planning, budgets, routines, lists and notes for the week ahead. " * 24
DEEP = "The heron nests by the old mill river every spring."


def write(shard: TenantShard, texts: list[str]) -> list[str]:
    with shard.write_lock:
        results = commit_writes(shard, [MemoryInput(content=t) for t in texts], unit(len(texts), seed=5), cfg=CFG,
                                now_ms=1_700_000_000_000)
    return [r.memory_id for r in results]


def deep_hits(shard: TenantShard) -> list[int]:
    return shard.lexical.search("heron nests mill river", 10)[1].tolist()


def test_windows_follow_their_memory_through_crashes_a_delete_and_a_compaction(tmp_path: Path, jvm: None,
                                                                                 builder) -> None:  # type: ignore[no-untyped-def]
    shard = load(tmp_path, builder)
    texts = [f"note {i}: the heron by the river" for i in range(6)] + [FILLER + DEEP + " " + FILLER[:600]]
    ids = write(shard, texts)
    docs = {m.memory_id: m.doc_id for m in shard.store.all()}
    long_doc = docs[ids[-1]]
    extra = len(windows(memory_text(shard.store.by_doc(long_doc))))   # type: ignore[arg-type]
    assert extra >= 3
    assert deep_hits(shard)[0] == long_doc and shard.lexical.count() == 7 + extra
    crash(shard)                                          # no close-time commit: the log replays the writes

    again = load(tmp_path, builder)
    assert deep_hits(again)[0] == long_doc and again.lexical.count() == 7 + extra
    with again.write_lock:
        again.apply(deletes=[ids[-1]])
    assert long_doc not in deep_hits(again) and again.lexical.count() == 6
    crash(again)                                          # the log replays the delete

    third = load(tmp_path, builder)
    assert long_doc not in deep_hits(third) and third.lexical.count() == 6
    with third.write_lock:
        third.store.compact()
    third.close()

    fourth = load(tmp_path, builder)
    try:
        assert long_doc not in deep_hits(fourth) and fourth.lexical.count() == 6 and len(deep_hits(fourth)) == 6
    finally:
        fourth.close()


def test_a_lexical_rebuild_writes_the_windows_again(tmp_path: Path, jvm: None,
                                                    builder) -> None:  # type: ignore[no-untyped-def]
    shard = load(tmp_path, builder)
    ids = write(shard, [f"note {i}: the heron by the river" for i in range(3)] + [FILLER + DEEP + " " + FILLER])
    long_doc = {m.memory_id: m.doc_id for m in shard.store.all()}[ids[-1]]
    extra = len(windows(memory_text(shard.store.by_doc(long_doc))))   # type: ignore[arg-type]
    try:
        shard.lexical_stale = True
        assert shard.repair_lexical()
        assert deep_hits(shard)[0] == long_doc and shard.lexical.count() == 4 + extra
    finally:
        shard.close()
