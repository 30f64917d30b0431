"""The second retrieval round's pure parts: when a first round is weak, and the Rocchio step."""

from __future__ import annotations

import numpy as np
import pytest

from server.engine.feedback import is_weak, rocchio


def test_weak_means_no_candidate_reaches_the_threshold() -> None:
    assert is_weak(np.array([0.2, 0.49]), below=0.5)
    assert not is_weak(np.array([0.2, 0.5]), below=0.5)
    assert not is_weak(np.zeros(0), below=0.5)          # nothing found: nothing to feed back
    assert not is_weak(np.array([0.1]), below=0.0)      # a threshold of 0: never


def test_rocchio_moves_the_unit_query_toward_the_feedback_mean() -> None:
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    docs = np.array([[0.0, 1.0, 0.0], [0.0, 0.6, 0.8]], dtype=np.float32)
    moved = rocchio(q, docs, weight=0.5)
    expected = np.array([1.0, 0.4, 0.2]) / np.linalg.norm([1.0, 0.4, 0.2])
    assert moved.dtype == np.float32
    assert moved == pytest.approx(expected, abs=1e-6)
    assert float(np.linalg.norm(moved)) == pytest.approx(1.0, abs=1e-6)
    assert float(moved @ docs.mean(axis=0)) > float(q @ docs.mean(axis=0))


def test_rocchio_without_feedback_or_weight_is_the_query() -> None:
    q = np.array([0.6, 0.8], dtype=np.float32)
    assert rocchio(q, np.zeros((0, 2)), weight=0.5) == pytest.approx(q)
    assert rocchio(q, np.ones((2, 2)), weight=0.0) == pytest.approx(q)
