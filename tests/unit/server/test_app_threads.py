"""The device-thread rule (server/app.py ``device_threads``): how many forward passes run at once."""

from __future__ import annotations

import pytest

from server.app import device_threads


def test_an_explicit_count_is_kept() -> None:
    assert device_threads(3, "cpu", 0) == 3 and device_threads(2, "cuda", 0) == 2


def test_cuda_runs_one_pass_at_a_time_by_default() -> None:
    assert device_threads(0, "cuda", 0) == 1 and device_threads(0, "cuda:1", 1) == 1


@pytest.mark.parametrize(("cores", "cpu_threads", "want"), [
    (2, 0, 2),    # auto: a pass has one torch thread, so two passes fill both cores
    (3, 0, 2),
    (4, 0, 1),    # auto: two torch threads a pass; one pass, the rest for the CPU stages
    (16, 0, 1),
    (16, 1, 2),   # one thread a pass, set by hand
    (8, 2, 1),
    (1, 0, 1),    # one core: nothing to run a second pass on
])
def test_auto_is_two_only_where_a_cpu_pass_has_one_thread(monkeypatch: pytest.MonkeyPatch, cores: int,
                                                         cpu_threads: int, want: int) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    monkeypatch.setattr("models.threads.process_cpus", lambda: cores)
    assert device_threads(0, "cpu", cpu_threads) == want
