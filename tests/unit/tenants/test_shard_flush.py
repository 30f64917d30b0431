"""The periodic flush commits Lucene only when its documents changed; a close commits it at the store's seq;
a crash after uses-only flushes restarts with every document searchable."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from tests.unit.tenants.test_shard_snapshot import crash, load, vectors, write

pytestmark = pytest.mark.usefixtures("jvm")


@pytest.fixture
def builder():
    pool = ThreadPoolExecutor(1)
    yield pool
    pool.shutdown(wait=True)


def test_uses_alone_leave_lucene_uncommitted_writes_and_close_commit_it(tmp_path, builder) -> None:  # type: ignore[no-untyped-def]
    shard = load(tmp_path / "t", builder)
    ids = write(shard, [f"the deploy of service {i} failed on friday" for i in range(5)], vectors(5, 1))
    shard.flush(periodic=True)
    committed = shard.lexical.committed_seq()
    assert committed == shard.store.seq                         # documents changed: committed
    shard.record_uses(ids[:2], now_ms=1_700_000_100_000)
    shard.flush(periodic=True)                                  # the uses are logged, the seq moves ...
    assert shard.store.seq > committed
    assert shard.lexical.committed_seq() == committed           # ... and Lucene is not committed for them
    write(shard, ["a new note about the friday deploy"], vectors(1, 2))
    shard.flush(periodic=True)
    assert shard.lexical.committed_seq() == shard.store.seq     # a new document: committed
    shard.record_uses(ids[:1], now_ms=1_700_000_200_000)
    shard.close()                                               # close: committed at the store's seq
    again = load(tmp_path / "t", builder)
    try:
        assert again.lexical.committed_seq() == again.store.seq
    finally:
        again.close()


def test_a_crash_after_uses_only_flushes_loses_nothing_lucene_holds(tmp_path, builder) -> None:  # type: ignore[no-untyped-def]
    shard = load(tmp_path / "t", builder)
    ids = write(shard, [f"invoice {i} was paid late by the customer" for i in range(4)], vectors(4, 3))
    shard.flush(periodic=True)
    write(shard, ["the quarterly report mentions a late invoice"], vectors(1, 4))   # logged, Lucene not committed
    shard.record_uses(ids, now_ms=1_700_000_300_000)
    shard.flush_touches(now_ms=1_700_000_300_000)
    crash(shard)
    again = load(tmp_path / "t", builder)
    try:
        assert again.lexical.committed_seq() == again.store.seq   # caught up from the log on load
        _, hits = again.lexical.search("quarterly report invoice", 5)
        assert len(hits) == 5
        assert again.store.get(ids[0]).access_count == 1
    finally:
        again.close()
