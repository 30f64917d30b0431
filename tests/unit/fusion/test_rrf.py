from __future__ import annotations

import numpy as np
import pytest

from server.fusion.rrf import rrf, rrf_max


def test_rrf_matches_the_formula_and_orders_best_first() -> None:
    scores, ids = rrf([np.array([10, 20, 30]), np.array([30, 40])], k=60)
    expected = {10: 1 / 61, 20: 1 / 62, 30: 1 / 63 + 1 / 61, 40: 1 / 62}
    assert ids.tolist() == [30, 10, 20, 40]
    assert scores.tolist() == pytest.approx([expected[i] for i in ids.tolist()])


def test_ties_break_by_smaller_id_and_padding_and_repeats_are_skipped() -> None:
    scores, ids = rrf([np.array([7, -1, 7, 3]), np.array([3, 7])], k=10)
    # 7: rank 1 in list a, rank 2 in b; 3: rank 2 in a, rank 1 in b → equal scores; 3 < 7 wins.
    assert ids.tolist() == [3, 7]
    assert scores[0] == pytest.approx(scores[1])


def test_weights_scale_lists_and_zero_weight_drops_a_list() -> None:
    _, ids = rrf([np.array([1, 2]), np.array([2, 1])], k=60, weights=[1.0, 3.0])
    assert ids.tolist() == [2, 1]
    _, only_b = rrf([np.array([1, 5]), np.array([2])], k=60, weights=[0.0, 1.0])
    assert only_b.tolist() == [2]


def test_empty_and_invalid_inputs() -> None:
    scores, ids = rrf([np.array([], dtype=np.int64)], k=60)
    assert len(scores) == len(ids) == 0
    with pytest.raises(ValueError):
        rrf([np.array([1])], k=0)
    with pytest.raises(ValueError):
        rrf([np.array([1])], weights=[1.0, 2.0])


def test_rrf_max_normalises_first_place_in_every_list_to_one() -> None:
    scores, _ = rrf([np.array([4]), np.array([4])], k=60, weights=[1.0, 0.5])
    assert scores[0] / rrf_max(k=60, weights=[1.0, 0.5]) == pytest.approx(1.0)


def test_rrf_filtered_gives_rrf_exactly_on_lists_without_padding_or_repeats() -> None:
    from server.fusion.rrf import rrf_filtered

    rng = np.random.default_rng(11)
    for _ in range(500):
        lists = [rng.choice(300, size=int(rng.integers(0, 120)), replace=False) for _ in range(2)]
        weights = [float(rng.choice([0.0, 0.3, 1.0])), float(rng.choice([0.0, 0.7, 1.0]))]
        k = float(rng.choice([1.0, 10.5, 60.0]))
        want = rrf(lists, k=k, weights=weights)
        got = rrf_filtered(lists, k=k, weights=weights)
        assert np.array_equal(got[1], want[1]) and np.array_equal(got[0], want[0])  # bit for bit
    with pytest.raises(ValueError):
        rrf_filtered([np.arange(3)], k=0, weights=[1.0])
