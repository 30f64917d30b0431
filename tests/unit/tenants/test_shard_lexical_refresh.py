"""Lucene refreshes behind a Write's acknowledgement (server/tenants/lexical_slot.py): the commit returns while the
refresher has not run, and a search started after it still finds the Write's documents (it waits for them, or
refreshes itself); a full disk met by the refresher marks the index stale, and searches keep its last state."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.unit.tenants.test_shard_snapshot import load, vectors, write

from server.lexical.jvm import jclass
from server.lexical.lucene import LuceneIndex
from server.tenants import lexical_slot
from server.tenants.lexical_slot import LexicalSlot
from server.tenants.shard import TenantShard

pytestmark = pytest.mark.usefixtures("jvm")


@pytest.fixture
def builder() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(1)
    yield pool
    pool.shutdown(wait=True)


LATE_S = 0.4


@pytest.fixture
def late(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refresher starts LATE_S late: a commit returns long before it made anything visible."""
    original = LexicalSlot._refresher

    def later(self: LexicalSlot) -> None:
        time.sleep(LATE_S)
        original(self)

    monkeypatch.setattr(LexicalSlot, "_refresher", later)


@pytest.fixture
def refreshes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that refreshed Lucene, in order."""
    names: list[str] = []
    original = LuceneIndex.refresh

    def counted(self: LuceneIndex) -> None:
        names.append(threading.current_thread().name)
        original(self)

    monkeypatch.setattr(LuceneIndex, "refresh", counted)
    return names


@pytest.fixture
def shard(tmp_path: Path, builder: ThreadPoolExecutor, refreshes: list[str]) -> Iterator[TenantShard]:
    """A loaded shard whose refreshes from here on are in ``refreshes``."""
    loaded = load(tmp_path / "t", builder)
    refreshes.clear()   # the load's own
    yield loaded
    loaded.close()


def test_a_search_after_the_commit_finds_it_while_the_refresher_is_late(tmp_path: Path, builder, late) -> None:  # type: ignore[no-untyped-def]
    shard = load(tmp_path / "t", builder)
    try:
        write(shard, ["the heron nests by the river"], vectors(1, 1))
        assert len(shard.lexical.search("heron", 5)[1]) == 1
        started = time.monotonic()
        write(shard, ["a kingfisher dives for minnows"], vectors(1, 2))
        assert time.monotonic() - started < LATE_S, "the commit waited for the refresh"
        _, ids = shard.lexical.search("kingfisher minnows", 5)
        assert len(ids) == 1, "a search after the acknowledgement must see the Write's documents"
    finally:
        shard.close()


def test_a_refresher_that_failed_leaves_the_refresh_to_the_search(tmp_path: Path, builder,  # type: ignore[no-untyped-def]
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    shard = load(tmp_path / "t", builder)
    original = LuceneIndex.refresh

    def fails_behind(self: LuceneIndex) -> None:
        if threading.current_thread().name.startswith("lexical-refresh:"):
            raise RuntimeError("a refresh that failed")
        original(self)

    monkeypatch.setattr(LuceneIndex, "refresh", fails_behind)
    try:
        write(shard, ["the swift returns in may"], vectors(1, 5))
        assert len(shard.lexical.search("swift may", 5)[1]) == 1
        assert not shard.lexical_stale
    finally:
        shard.close()


def test_a_search_waits_for_the_refresher_rather_than_refreshing_again(shard: TenantShard,
                                                                      refreshes: list[str]) -> None:
    for i in range(5):
        write(shard, [f"sparrow note {i} at dawn"], vectors(1, 10 + i))
        assert len(shard.lexical.search(f"sparrow {i}", 10)[1]) == i + 1
    assert refreshes and all(name.startswith("lexical-refresh:") for name in refreshes), refreshes


def test_a_full_disk_at_the_refresh_behind_marks_the_index_stale(tmp_path: Path, builder,  # type: ignore[no-untyped-def]
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    shard = load(tmp_path / "t", builder)
    try:
        write(shard, ["the otter sleeps in the reeds"], vectors(1, 3))
        assert len(shard.lexical.search("otter", 5)[1]) == 1
        with monkeypatch.context() as m:
            def full(self: LuceneIndex) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

            m.setattr(LuceneIndex, "refresh", full)
            write(shard, ["a second otter joins it"], vectors(1, 4))   # acknowledged: the log holds it
            assert len(shard.lexical.search("otter", 5)[1]) == 1       # the last state, no error
            assert shard.lexical_stale and shard.repair_due()
        assert shard.repair_lexical()                                  # space is back: rebuilt from the store
        assert len(shard.lexical.search("otter", 5)[1]) == 2
    finally:
        shard.close()


def test_refresher_threads_leave_no_java_thread_behind(tmp_path: Path, builder) -> None:  # type: ignore[no-untyped-def]
    """Each burst of Writes gets a refresher thread that ends: it detaches from the JVM, or the JVM would keep a
    Java thread object for every Write (pyjnius attaches a thread on its first Java call)."""
    shard = load(tmp_path / "t", builder)
    java_threads = jclass("java.lang.Thread").activeCount
    try:
        write(shard, ["the first note"], vectors(1, 20))
        shard.lexical.count()
        before = java_threads()
        for i in range(20):
            write(shard, [f"wren note {i}"], vectors(1, 21 + i))
            assert len(shard.lexical.search(f"wren {i}", 30)[1]) == i + 1   # visible: the refresher is done
            for thread in [t for t in threading.enumerate() if t.name.startswith("lexical-refresh:")]:
                thread.join(5)
        assert java_threads() <= before + 2
    finally:
        shard.close()


def test_a_write_on_its_way_holds_the_refresh_until_a_search_asks(shard: TenantShard, refreshes: list[str]) -> None:
    """A stream of Writes is refreshed once for several (lexical_slot.py): while the next Write is on its way the
    refresher waits, and a search asks it for the refresh at once."""
    with shard.write_coming():
        write(shard, ["the heron nests by the river"], vectors(1, 1))
        time.sleep(4 * lexical_slot.REFRESH_QUIET_S)
        assert refreshes == [], "the refresher did not wait for the Write on its way"
        assert len(shard.lexical.search("heron river", 5)[1]) == 1
        assert len(refreshes) == 1 and refreshes[0].startswith("lexical-refresh:"), refreshes


def test_the_refresh_waits_at_most_the_delay(shard: TenantShard, refreshes: list[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical_slot, "REFRESH_DELAY_S", 0.2)
    with shard.write_coming():
        write(shard, ["a kingfisher dives for minnows"], vectors(1, 2))
        deadline = time.monotonic() + 3.0
        while not refreshes and time.monotonic() < deadline:
            time.sleep(0.02)
        assert refreshes, "no refresh within the delay while Writes kept coming"
        assert time.monotonic() - (deadline - 3.0) >= 0.15


def test_a_write_with_none_behind_is_refreshed_after_the_quiet_wait(shard: TenantShard, refreshes: list[str]) -> None:
    with shard.write_coming():
        write(shard, ["the swift returns in may"], vectors(1, 5))
    deadline = time.monotonic() + lexical_slot.REFRESH_DELAY_S / 2
    while not refreshes and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(refreshes) == 1, "a Write with none behind it waited for the delay"
