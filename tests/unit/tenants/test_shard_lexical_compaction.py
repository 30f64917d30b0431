"""A compaction that runs while Lucene's last commit is older than the log's end drops the delete records a
restart would replay into Lucene: the loader must then rebuild the lexical index from the store instead of
replaying, or a deleted memory comes back as a live BM25 document after a crash (search filters it out, so it
only takes a candidate slot). Short memories, so no window documents are involved."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from server.lexical.lucene import LuceneIndex
from server.tenants.shard import TenantShard
from tests.unit.tenants.test_shard_snapshot import builder, crash, delete, load, vectors, write

__all__ = ["builder"]   # the fixture, used by name
TEXTS = [f"note {i}: the heron by the river" for i in range(5)]


def lexical_docs(shard: TenantShard) -> set[int]:
    return set(shard.lexical.search("heron river", 50)[1].tolist())


def committed_then_deleted(tmp_path: Path, builder) -> tuple[TenantShard, int]:  # type: ignore[no-untyped-def]
    """A shard whose Lucene commit predates a delete; returns it and the deleted memory's doc id."""
    shard = load(tmp_path, builder)
    ids = write(shard, TEXTS, vectors(len(TEXTS), seed=3))
    shard.flush()                                        # Lucene committed at the store's seq
    gone = shard.store.get(ids[0]).doc_id                # type: ignore[union-attr]
    delete(shard, [ids[0]])                              # after the last Lucene commit
    assert shard.lexical.committed_seq() < shard.store.seq
    return shard, gone


def reloaded_docs(tmp_path: Path, builder) -> tuple[set[int], set[int], int]:  # type: ignore[no-untyped-def]
    again = load(tmp_path, builder)
    try:
        return lexical_docs(again), {m.doc_id for m in again.store.all()}, again.lexical.count()
    finally:
        again.close()


def test_a_compaction_past_the_lucene_commit_then_a_crash_leaves_no_deleted_document(
        tmp_path: Path, jvm: None, builder) -> None:  # type: ignore[no-untyped-def]
    shard, gone = committed_then_deleted(tmp_path, builder)
    with shard.write_lock:
        shard.store.compact()                            # no Lucene commit first: the delete record is dropped
    crash(shard)

    docs, live, count = reloaded_docs(tmp_path, builder)
    assert gone not in docs and docs == live and count == len(TEXTS) - 1


def test_a_purge_whose_lucene_commit_meets_a_full_disk_compacts_and_a_crash_leaves_no_deleted_document(
        tmp_path: Path, jvm: None, builder, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    shard = load(tmp_path, builder)
    ids = write(shard, TEXTS, vectors(len(TEXTS), seed=3))
    shard.flush()
    gone = shard.store.get(ids[0]).doc_id               # type: ignore[union-attr]

    def full(self: LuceneIndex, seq: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m, shard.write_lock:
        m.setattr(LuceneIndex, "commit", full)
        assert shard.purge_locked([ids[0]], key_id="k", now_ms=1_700_000_000_000, compact=True) == 1
    assert shard.store.compactions == 1                  # the forget still rewrote the log
    crash(shard)

    docs, live, count = reloaded_docs(tmp_path, builder)
    assert gone not in docs and docs == live and count == len(TEXTS) - 1


def test_a_purge_with_a_stale_lexical_index_then_a_crash_leaves_no_deleted_document(
        tmp_path: Path, jvm: None, builder) -> None:  # type: ignore[no-untyped-def]
    shard = load(tmp_path, builder)
    ids = write(shard, TEXTS, vectors(len(TEXTS), seed=3))
    shard.flush()
    gone = shard.store.get(ids[0]).doc_id               # type: ignore[union-attr]
    shard.lexical_stale = True                           # a write met a full disk: the delete skips Lucene
    with shard.write_lock:
        shard.purge_locked([ids[0]], key_id="k", now_ms=1_700_000_000_000, compact=True)
    crash(shard)

    docs, live, count = reloaded_docs(tmp_path, builder)
    assert gone not in docs and docs == live and count == len(TEXTS) - 1


def test_a_normal_compaction_replays_instead_of_rebuilding(tmp_path: Path, jvm: None, builder,
                                                           caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    shard, gone = committed_then_deleted(tmp_path, builder)
    assert shard.compact() is not None                   # Lucene committed at the plan's seq first
    crash(shard)

    with caplog.at_level("WARNING", logger="server.tenants.loading"):
        docs, live, count = reloaded_docs(tmp_path, builder)
    assert gone not in docs and docs == live and count == len(TEXTS) - 1
    assert "rebuilding" not in caplog.text
