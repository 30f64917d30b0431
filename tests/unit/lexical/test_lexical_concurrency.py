from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from server.lexical.jvm import detach_current_thread
from server.lexical.lucene import LuceneIndex


@pytest.fixture
def fast_thread_switching() -> Iterator[None]:
    """Switch threads as often as possible, to expose races in the pyjnius layer."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def run_threads(*targets: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def wrap(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)
        finally:
            detach_current_thread()

    threads = [threading.Thread(target=wrap, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "thread hung"
    if errors:
        raise errors[0]


def test_searches_while_writing(index: LuceneIndex) -> None:
    index.upsert([(i, f"seed document number {i} about otters") for i in range(200)])
    stop = threading.Event()
    seen_counts: list[int] = []

    def writer() -> None:
        try:
            for i in range(200, 400, 2):
                pair = [(j, f"new document {j} about otters and beavers") for j in (i, i + 1)]
                index.upsert(pair)
                if i % 10 == 0:
                    index.delete([i - 200, i - 190])
                if i % 50 == 0:
                    index.commit(i)
        finally:
            stop.set()

    def searcher() -> None:
        while not stop.is_set():
            scores, ids = index.search("otters beavers", 20)
            assert scores.dtype == np.float32 and ids.dtype == np.int64
            assert len(ids) == len(set(ids.tolist())) <= 20
            assert np.all(np.diff(scores) <= 0)
            seen_counts.append(index.count())
            stop.wait(0.0005)  # leave the writer some GIL time

    run_threads(writer, searcher, searcher)
    assert seen_counts, "searchers never ran"
    deleted = {d for i in range(200, 400, 10) for d in (i - 200, i - 190)}
    assert index.count() == 400 - len(deleted)
    _, ids = index.search("otters", 1000)
    assert set(ids.tolist()) == set(range(400)) - deleted


def test_concurrent_tenants_stay_isolated(
    jvm: None, tmp_path: Path, fast_thread_switching: None
) -> None:
    """Writes and searches on two tenants from many threads never cross over.

    pyjnius binds the target object of ``obj.method`` on the method object shared by all
    instances (see ``server/lexical/jvm.py``); a Java call inside the argument list of
    another lets a second thread redirect the outer call to its own tenant's object.
    """
    tenants = {name: LuceneIndex.open(tmp_path / name) for name in ("alpha", "beta")}
    per_thread = 100

    def write(name: str, start: int) -> Callable[[], None]:
        def run() -> None:
            index = tenants[name]
            for i in range(start, start + per_thread):
                index.upsert([(i, f"{name} memory {i}")])
        return run

    def search(name: str) -> Callable[[], None]:
        other = "beta" if name == "alpha" else "alpha"

        def run() -> None:
            index = tenants[name]
            for _ in range(100):
                assert index.search(other, 50)[1].size == 0
                index.search_many([name, f"{name} memory"], 10)
        return run

    try:
        run_threads(
            write("alpha", 0), write("alpha", 1000), write("beta", 0), write("beta", 1000),
            search("alpha"), search("beta"),
        )
        for name, index in tenants.items():
            other = "beta" if name == "alpha" else "alpha"
            assert index.count() == 2 * per_thread
            assert index.search(other, 10)[1].size == 0
            _, ids = index.search(name, 1000)
            expected = set(range(per_thread)) | set(range(1000, 1000 + per_thread))
            assert set(ids.tolist()) == expected
    finally:
        for index in tenants.values():
            index.close()


def test_close_waits_for_in_flight_searches(jvm: None, tmp_path: Path) -> None:
    index = LuceneIndex.open(tmp_path / "tenant")
    index.upsert([(i, f"lynx {i}") for i in range(500)])
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(index.search_many, ["lynx"] * 20, 50) for _ in range(8)]
        index.close()
        outcomes = []
        for f in futures:
            try:
                outcomes.append(len(f.result()))
            except Exception as exc:  # refused after close: the only allowed failure
                assert type(exc).__name__ == "LexicalIndexClosedError"
                outcomes.append(-1)
    assert all(o in (20, -1) for o in outcomes)


def test_instance_calls_of_one_method_from_many_threads_keep_their_receiver(
    jvm: None, fast_thread_switching: None
) -> None:
    """pyjnius binds an instance method's receiver on the method object that every instance of the class shares;
    without :func:`jcall`, ~1 in 40,000 of these calls went to another thread's File (or to a freed reference:
    NullPointerException, or SIGSEGV), and concurrent tenant loads crashed a replica's JVM in ``File.toPath``."""
    from server.lexical.jvm import jcall, jclass

    JFile = jclass("java.io.File")
    wrong: list[tuple[str, str]] = []
    calls = [0]

    def caller(t: int) -> Callable[[], None]:
        def run() -> None:
            for n in range(12_000):
                path = f"/tenant-{t}/{n}"
                got = jcall(jcall(JFile(path), "toPath"), "toString")
                calls[0] += 1
                if got != path:
                    wrong.append((path, got))
        return run

    run_threads(*(caller(t) for t in range(4)))
    assert calls[0] == 48_000
    assert not wrong, wrong[:5]
