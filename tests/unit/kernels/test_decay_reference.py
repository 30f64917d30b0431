"""kernels.decay.decay_rank against a naive per-element Python loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernels import array_module, get_decay_ranker
from kernels import decay as decay_module
from kernels.decay import DecayRanked, decay_rank


def naive_elementwise(rel, age, half_life, imp, pinned, importance_weight, floor=None):
    floor = np.zeros(len(rel)) if floor is None else np.broadcast_to(floor, len(rel))
    decays, weights, finals = [], [], []
    for i in range(len(rel)):
        a = float(age[i])
        a = 0.0 if math.isnan(a) or a < 0 else a
        hl = float(half_life[i])
        decays_now = bool(not pinned[i] and hl > 0 and math.isfinite(hl))
        d = float(floor[i]) + (1.0 - float(floor[i])) * 0.5 ** (a / hl) if decays_now else 1.0
        w = (1.0 - importance_weight) + importance_weight * float(imp[i])
        decays.append(d)
        weights.append(w)
        finals.append(float(rel[i]) * d * w)
    return np.array(decays), np.array(weights), np.array(finals)


def naive_top_k(final, offsets, top_k):
    q = len(offsets) - 1
    scores = np.full((q, top_k), -np.inf)
    indices = np.full((q, top_k), -1, dtype=np.int64)
    for s in range(q):
        members = list(range(int(offsets[s]), int(offsets[s + 1])))
        members.sort(key=lambda i: (-float(final[i]), i))
        for j, i in enumerate(members[:top_k]):
            scores[s, j] = final[i]
            indices[s, j] = i
    return scores, indices


def random_case(seed: int, *, q: int = 12, max_segment: int = 40):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, max_segment, size=q)
    sizes[rng.random(q) < 0.25] = 0  # empty segments
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    rel = rng.random(n, dtype=np.float32) * 3
    rel[rng.random(n) < 0.2] = 1.0  # exact ties where nothing decays
    age = (rng.random(n, dtype=np.float32) * 1e6 - 1e5).astype(np.float32)  # some negative ages
    half_life = (rng.random(n, dtype=np.float32) * 5e5 + 1.0).astype(np.float32)
    special = rng.random(n)
    half_life[special < 0.1] = np.inf
    half_life[(special >= 0.1) & (special < 0.15)] = 0.0
    half_life[(special >= 0.15) & (special < 0.18)] = np.nan
    imp = rng.random(n, dtype=np.float32)
    pinned = rng.random(n) < 0.15
    return rel, age, half_life, imp, pinned, offsets


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("importance_weight", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("top_k", [1, 5, 64])
def test_matches_naive_loop_on_random_segments(seed, importance_weight, top_k):
    rel, age, half_life, imp, pinned, offsets = random_case(seed)
    got = decay_rank(rel, age, half_life, imp, pinned, offsets, top_k=top_k, importance_weight=importance_weight)

    d, w, f = naive_elementwise(rel, age, half_life, imp, pinned, importance_weight)
    np.testing.assert_allclose(got.decay, d, rtol=2e-6, atol=1e-30)
    np.testing.assert_allclose(got.weight, w, rtol=2e-6)
    np.testing.assert_allclose(got.final, f, rtol=5e-6, atol=1e-30)

    # The selection is checked on the reference's own float32 finals, so rounding cannot reorder it.
    scores, indices = naive_top_k(got.final, offsets, top_k)
    np.testing.assert_array_equal(got.indices, indices)
    np.testing.assert_array_equal(got.scores, scores.astype(np.float32))
    assert got.scores.dtype == np.float32 and got.indices.dtype == np.int64
    for array in (got.decay, got.weight, got.final):
        assert array.dtype == np.float32 and array.shape == rel.shape


def test_ties_break_by_lower_global_index():
    offsets = np.array([0, 4, 8], dtype=np.int64)
    rel = np.array([1, 2, 2, 1, 5, 5, 5, 5], dtype=np.float32)
    ones = np.ones(8, dtype=np.float32)
    got = decay_rank(rel, ones * 0, ones * np.inf, ones, np.zeros(8, bool), offsets, top_k=3, importance_weight=0.0)
    np.testing.assert_array_equal(got.indices, [[1, 2, 0], [4, 5, 6]])
    np.testing.assert_array_equal(got.scores, [[2, 2, 1], [5, 5, 5]])


def test_short_and_empty_segments_are_padded():
    offsets = np.array([0, 0, 2, 2], dtype=np.int64)
    ones = np.ones(2, dtype=np.float32)
    got = decay_rank(
        np.array([0.5, 0.7], np.float32), ones, ones * 10, ones, np.zeros(2, bool), offsets,
        top_k=3, importance_weight=0.0,
    )
    assert got.scores.shape == (3, 3) and got.indices.shape == (3, 3)
    np.testing.assert_array_equal(got.indices, [[-1, -1, -1], [1, 0, -1], [-1, -1, -1]])
    assert np.isneginf(got.scores[0]).all() and np.isneginf(got.scores[1, 2])


def test_decay_rules():
    age = np.array([10, 10, 10, 10, 10, -10, 20, np.inf, np.inf, np.nan], dtype=np.float32)
    half_life = np.array([10, np.inf, 0, 10, np.nan, 10, 10, np.inf, 10, 10], dtype=np.float32)
    pinned = np.array([0, 0, 0, 1, 0, 0, 0, 0, 0, 0], dtype=bool)
    n = len(age)
    got = decay_rank(
        np.ones(n, np.float32), age, half_life, np.ones(n, np.float32), pinned,
        np.array([0, n]), top_k=n, importance_weight=0.0,
    )
    # one half-life halves; inf, 0, NaN half-life and pinned never decay (even at infinite age);
    # negative and NaN ages are age 0
    np.testing.assert_allclose(got.decay, [0.5, 1, 1, 1, 1, 1, 0.25, 1, 0, 1], rtol=1e-7)


def test_importance_weight_blends_importance():
    imp = np.array([0.0, 0.5, 1.0], dtype=np.float32)
    ones = np.ones(3, dtype=np.float32)
    args = (ones * 2, ones * 0, ones * np.inf, imp, np.zeros(3, bool), np.array([0, 3]))
    off = decay_rank(*args, top_k=3, importance_weight=0.0)
    np.testing.assert_array_equal(off.weight, [1, 1, 1])
    np.testing.assert_array_equal(off.final, [2, 2, 2])
    np.testing.assert_array_equal(off.indices, [[0, 1, 2]])
    half = decay_rank(*args, top_k=3, importance_weight=0.5)
    np.testing.assert_allclose(half.weight, [0.5, 0.75, 1.0])
    np.testing.assert_array_equal(half.indices, [[2, 1, 0]])
    full = decay_rank(*args, top_k=3, importance_weight=1.0)
    np.testing.assert_allclose(full.final, [0.0, 1.0, 2.0])


def test_zero_queries_and_zero_top_k():
    empty = np.zeros(0, dtype=np.float32)
    got = decay_rank(empty, empty, empty, empty, np.zeros(0, bool), np.array([0]), top_k=5, importance_weight=0.2)
    assert got.scores.shape == (0, 5) and got.indices.shape == (0, 5) and got.final.shape == (0,)
    ones = np.ones(3, dtype=np.float32)
    got = decay_rank(ones, ones, ones, ones, np.zeros(3, bool), np.array([0, 1, 3]), top_k=0, importance_weight=0)
    assert got.scores.shape == (2, 0) and got.indices.shape == (2, 0)


def test_accepts_lists_and_returns_frozen_result():
    got = decay_rank([1.0, 3.0], [0, 0], [1, 1], [1, 1], [False, False], [0, 2], top_k=1, importance_weight=0)
    assert isinstance(got, DecayRanked)
    np.testing.assert_array_equal(got.indices, [[1]])
    with pytest.raises(AttributeError):
        got.scores = got.scores  # type: ignore[misc]


@pytest.mark.parametrize(
    ("offsets", "lengths", "kwargs", "message"),
    [
        ([0, 2], (3, 3, 3, 3, 3), {}, "end at n"),
        ([1, 3], (3, 3, 3, 3, 3), {}, "start at 0"),
        ([0, 2, 1, 3], (3, 3, 3, 3, 3), {}, "not decrease"),
        ([0, 3], (3, 2, 3, 3, 3), {}, "one length"),
        ([0, 3], (3, 3, 3, 3, 3), {"importance_weight": 1.5}, "importance_weight"),
        ([0, 3], (3, 3, 3, 3, 3), {"top_k": -1}, "top_k"),
        ([0.0, 3.0], (3, 3, 3, 3, 3), {}, "integers"),
    ],
)
def test_rejects_bad_inputs(offsets, lengths, kwargs, message):
    arrays = [np.ones(m, dtype=np.float32) for m in lengths[:4]] + [np.zeros(lengths[4], bool)]
    params = {"top_k": 2, "importance_weight": 0.5, **kwargs}
    with pytest.raises(ValueError, match=message):
        decay_rank(*arrays, np.asarray(offsets), **params)


def test_cpu_ranker_is_the_reference_and_bad_device_is_rejected():
    assert get_decay_ranker("cpu") is decay_module.decay_rank
    with pytest.raises(ValueError, match="unknown device"):
        get_decay_ranker("tpu")


def test_cuda_ranker_falls_back_to_numpy_without_cupy():
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert get_decay_ranker("cuda") is decay_module.decay_rank
    else:
        pytest.skip("CuPy is installed; tests/gpu covers the CUDA path")


def test_array_module_is_numpy_for_numpy_arrays():
    assert array_module(np.zeros(2), np.ones(3)) is np


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("floor_kind", ["scalar", "per-candidate"])
def test_decay_floor_matches_naive_loop(seed, floor_kind):
    rel, age, half_life, imp, pinned, offsets = random_case(seed)
    rng = np.random.default_rng(100 + seed)
    floor = np.float32(0.4) if floor_kind == "scalar" else rng.random(len(rel), dtype=np.float32)
    got = decay_rank(rel, age, half_life, imp, pinned, offsets, top_k=10, importance_weight=0.5, decay_floor=floor)
    d, _, f = naive_elementwise(rel, age, half_life, imp, pinned, 0.5, floor=floor)
    np.testing.assert_allclose(got.decay, d, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(got.final, f, rtol=5e-6, atol=1e-7)
    decaying = (half_life > 0) & np.isfinite(half_life) & ~pinned
    assert (got.decay[decaying] >= np.broadcast_to(floor, len(rel))[decaying] - 1e-7).all()


def test_decay_floor_keeps_an_old_relevant_memory_above_a_new_irrelevant_one():
    # A year-old exact answer (relevance 1.0) against a fresh weak match (0.2), 48 h half-life.
    args = (np.array([1.0, 0.2], np.float32), np.array([365 * 86400.0, 0.0], np.float32),
            np.full(2, 48 * 3600.0, np.float32), np.ones(2, np.float32), np.zeros(2, bool), np.array([0, 2]))
    assert decay_rank(*args, top_k=2, importance_weight=0.0).indices[0].tolist() == [1, 0]
    assert decay_rank(*args, top_k=2, importance_weight=0.0, decay_floor=0.5).indices[0].tolist() == [0, 1]


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), [0.5, 0.5]])
def test_decay_floor_is_validated(bad):
    rel, age, half_life, imp, pinned, offsets = random_case(0)
    with pytest.raises(ValueError):
        decay_rank(rel, age, half_life, imp, pinned, offsets, top_k=3, importance_weight=0.5, decay_floor=bad)


def naive_bounded(rel, age, half_life, imp, pinned, *, recency_weight, boost, weight_cap, factor, importance_weight):
    """The bounded combination, one element at a time: recency, the fading access boost, the factor."""
    decays, _, _ = naive_elementwise(rel, age, half_life, imp, pinned, importance_weight)
    out = []
    for i in range(len(rel)):
        base = (1.0 - importance_weight) + importance_weight * float(imp[i])
        w = max(base, min(float(weight_cap[i]), base + float(boost[i]) * decays[i]))
        r = (1.0 - float(recency_weight[i])) + float(recency_weight[i]) * decays[i]
        out.append((decays[i], r, w, float(rel[i]) * r * w * float(factor[i])))
    return [np.array(c) for c in zip(*out)] if out else [np.zeros(0)] * 4


@pytest.mark.parametrize("seed", range(6))
def test_bounded_recency_access_boost_and_factor_match_the_naive_loop(seed: int) -> None:
    rel, age, half_life, imp, pinned, offsets = random_case(seed)
    n = len(rel)
    rng = np.random.default_rng(100 + seed)
    rw = rng.random(n).astype(np.float32)
    boost = (rng.random(n) * 0.3).astype(np.float32)
    cap = (0.6 + rng.random(n) * 0.5).astype(np.float32)
    factor = (1.0 + rng.random(n) * (rng.random(n) < 0.3)).astype(np.float32)
    got = decay_rank(rel, age, half_life, imp, pinned, offsets, top_k=7, importance_weight=0.4, recency_weight=rw,
                     boost=boost, weight_cap=cap, factor=factor)
    d, r, w, f = naive_bounded(rel, age, half_life, imp, pinned, recency_weight=rw, boost=boost, weight_cap=cap,
                               factor=factor, importance_weight=0.4)
    np.testing.assert_allclose(got.decay, d, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.recency, r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.weight, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.final, f, rtol=1e-4, atol=1e-5)
    assert np.all(got.recency >= 1 - rw - 1e-6)           # bounded: time never costs more than the weight
    assert np.all(got.weight >= (0.6 + 0.4 * imp) - 1e-6)  # the boost never lowers the importance factor


def test_defaults_of_the_new_inputs_keep_the_plain_product() -> None:
    rel, age, half_life, imp, pinned, offsets = random_case(3)
    plain = decay_rank(rel, age, half_life, imp, pinned, offsets, top_k=5, importance_weight=0.5)
    d, w, f = naive_elementwise(rel, age, half_life, imp, pinned, 0.5)
    np.testing.assert_allclose(plain.final, f, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plain.recency, plain.decay, atol=1e-7)


def test_a_bad_recency_weight_or_factor_is_refused() -> None:
    rel, age, half_life, imp, pinned, offsets = random_case(1)
    with pytest.raises(ValueError, match="recency_weight"):
        decay_rank(rel, age, half_life, imp, pinned, offsets, top_k=3, importance_weight=0.5, recency_weight=1.5)
    with pytest.raises(ValueError, match="factor"):
        decay_rank(rel, age, half_life, imp, pinned, offsets, top_k=3, importance_weight=0.5, factor=-1.0)
