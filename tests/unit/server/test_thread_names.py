"""The server's pool threads carry their Python names at the OS level (server/app.py ``pool_thread_init``), which
the serving probe's per-thread CPU breakdown reads from /proc."""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchmarks.serving.probe import _thread_cpu_s, thread_ms_per_query
from server.app import pool_thread_init

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc (Linux)")


def _own_comm() -> str:
    return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()


def test_a_pool_thread_is_named_at_the_os_level() -> None:
    with ThreadPoolExecutor(1, thread_name_prefix="device", initializer=pool_thread_init, initargs=(1,)) as pool:
        assert pool.submit(_own_comm).result() == "device_0"
    with ThreadPoolExecutor(1, thread_name_prefix="plain") as pool:   # without it: the process's name
        assert pool.submit(_own_comm).result() != "plain_0"


def test_the_breakdown_sums_threads_of_one_name_per_query() -> None:
    before = {"1": ("cpu_0", 1.0), "2": ("cpu_1", 2.0), "3": ("device_0", 5.0)}
    after = {"1": ("cpu_0", 1.5), "2": ("cpu_1", 2.5), "3": ("device_0", 7.0), "4": ("cpu_0", 0.25)}  # 4: started within
    assert thread_ms_per_query(before, after, 100) == {"device_0": 20.0, "cpu_0": 7.5, "cpu_1": 5.0}


def test_this_process_threads_are_read_from_proc() -> None:
    threads = _thread_cpu_s(os.getpid())
    assert str(threading.get_native_id()) in threads and all(cpu >= 0 for _, cpu in threads.values())
