"""kernels.decay_cupy.decay_rank against the NumPy reference (needs CuPy and a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import cuda_available
from kernels.decay import decay_rank as reference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a CUDA device"),
]


def random_case(seed: int, *, q: int, max_segment: int):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, max_segment, size=q)
    sizes[rng.random(q) < 0.2] = 0
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    rel = rng.random(n, dtype=np.float32) * 3
    rel[rng.random(n) < 0.2] = 1.0
    age = (rng.random(n, dtype=np.float32) * 1e6 - 1e5).astype(np.float32)
    half_life = (rng.random(n, dtype=np.float32) * 5e5 + 1.0).astype(np.float32)
    special = rng.random(n)
    half_life[special < 0.1] = np.inf
    half_life[(special >= 0.1) & (special < 0.15)] = 0.0
    half_life[(special >= 0.15) & (special < 0.18)] = np.nan
    imp = rng.random(n, dtype=np.float32)
    pinned = rng.random(n) < 0.15
    return rel, age, half_life, imp, pinned, offsets


def assert_same_ranking(got, want, offsets) -> None:
    """Indices equal, except where rounding (exp2f vs NumPy, <= a few ulp) swaps near-equal finals."""
    np.testing.assert_allclose(got.decay, want.decay, rtol=1e-5, atol=1e-30)
    np.testing.assert_array_equal(got.weight, want.weight)
    np.testing.assert_allclose(got.final, want.final, rtol=1e-5, atol=1e-30)
    # atol: the GPU flushes float32 subnormals (< 1.2e-38) to zero, NumPy keeps them (seen on an H200: 8e-40 vs 0)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-30)
    assert got.indices.shape == want.indices.shape and got.indices.dtype == np.int64
    mismatch = got.indices != want.indices
    for s, j in zip(*np.nonzero(mismatch)):
        i_got, i_want = got.indices[s, j], want.indices[s, j]
        assert i_got >= 0 and i_want >= 0, (s, j)
        assert offsets[s] <= i_got < offsets[s + 1]
        np.testing.assert_allclose(want.final[i_got], want.final[i_want], rtol=1e-5)
    assert mismatch.mean() < 0.01


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("importance_weight", [0.0, 0.4, 1.0])
@pytest.mark.parametrize(("q", "max_segment", "top_k"), [(16, 50, 10), (64, 2000, 100), (3, 5, 8)])
def test_matches_numpy_reference(seed, importance_weight, q, max_segment, top_k) -> None:
    from kernels.decay_cupy import decay_rank

    args = random_case(seed, q=q, max_segment=max_segment)
    got = decay_rank(*args, top_k=top_k, importance_weight=importance_weight)
    want = reference(*args, top_k=top_k, importance_weight=importance_weight)
    assert_same_ranking(got, want, args[-1])


def test_exact_ties_break_by_lower_index() -> None:
    from kernels.decay_cupy import decay_rank

    offsets = np.array([0, 4, 8], dtype=np.int64)
    rel = np.array([1, 2, 2, 1, 5, 5, 5, 5], dtype=np.float32)
    ones = np.ones(8, dtype=np.float32)
    args = (rel, ones * 0, ones * np.inf, ones, np.zeros(8, bool), offsets)
    got = decay_rank(*args, top_k=3, importance_weight=0.0)
    np.testing.assert_array_equal(got.indices, [[1, 2, 0], [4, 5, 6]])
    np.testing.assert_array_equal(got.scores, [[2, 2, 1], [5, 5, 5]])


def test_accepts_cupy_inputs_and_edge_shapes() -> None:
    import cupy

    from kernels import get_decay_ranker
    from kernels.decay_cupy import decay_rank

    assert get_decay_ranker("cuda") is decay_rank
    args = random_case(7, q=5, max_segment=20)
    on_device = tuple(cupy.asarray(a) for a in args)
    got = decay_rank(*on_device, top_k=4, importance_weight=0.5)
    assert isinstance(got.scores, np.ndarray)
    assert_same_ranking(got, reference(*args, top_k=4, importance_weight=0.5), args[-1])

    empty = np.zeros(0, dtype=np.float32)
    none = decay_rank(empty, empty, empty, empty, np.zeros(0, bool), np.array([0, 0, 0]), top_k=2, importance_weight=0)
    np.testing.assert_array_equal(none.indices, [[-1, -1], [-1, -1]])
    assert np.isneginf(none.scores).all()
    zero_k = decay_rank(*args, top_k=0, importance_weight=0.0)
    assert zero_k.indices.shape == (5, 0)


@pytest.mark.parametrize("seed", range(3))
def test_decay_floor_matches_numpy_reference(seed) -> None:
    from kernels.decay_cupy import decay_rank

    args = random_case(seed, q=32, max_segment=200)
    floor = np.random.default_rng(seed).random(int(args[-1][-1]), dtype=np.float32)
    got = decay_rank(*args, top_k=20, importance_weight=0.5, decay_floor=floor)
    want = reference(*args, top_k=20, importance_weight=0.5, decay_floor=floor)
    assert_same_ranking(got, want, args[-1])


@pytest.mark.parametrize("seed", range(4))
def test_bounded_inputs_match_the_reference(seed: int) -> None:
    from kernels.decay_cupy import decay_rank as gpu

    rel, age, half_life, imp, pinned, offsets = random_case(seed, q=16, max_segment=300)
    rng = np.random.default_rng(seed)
    n = len(rel)
    extra = dict(recency_weight=rng.random(n).astype(np.float32), boost=(rng.random(n) * 0.3).astype(np.float32),
                 weight_cap=(0.6 + rng.random(n) * 0.5).astype(np.float32),
                 factor=(1.0 + rng.random(n)).astype(np.float32))
    got = gpu(rel, age, half_life, imp, pinned, offsets, top_k=10, importance_weight=0.3, **extra)
    want = reference(rel, age, half_life, imp, pinned, offsets, top_k=10, importance_weight=0.3, **extra)
    np.testing.assert_allclose(got.recency, want.recency, rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(got.weight, want.weight, rtol=1e-5)
    np.testing.assert_allclose(got.final, want.final, rtol=1e-4, atol=1e-30)
