from __future__ import annotations

import os

import pytest
import torch

from models.threads import default_cpu_threads, set_cpu_threads


def test_default_leaves_one_cpu_free() -> None:
    assert default_cpu_threads() == max(1, len(os.sched_getaffinity(0)) - 1)


def test_set_cpu_threads_sets_and_validates() -> None:
    before = torch.get_num_threads()
    try:
        assert set_cpu_threads(1) == 1 and torch.get_num_threads() == 1
        assert set_cpu_threads() == default_cpu_threads() == torch.get_num_threads()
        with pytest.raises(ValueError):
            set_cpu_threads(0)
    finally:
        torch.set_num_threads(before)
