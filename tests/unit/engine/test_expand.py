"""The second hop (server/engine/expand.py): which turns it reads and what relevance they may reach."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from server.domain import Memory, MemoryStatus, MemoryType
from server.engine import expand
from server.engine.candidates import Candidates
from server.fusion.calibration import fused_features
from server.store.memory_store import TenantStore
from tests import store_support

DIM = 4
MIN = 60_000
T = 10**12
EP = MemoryType.EPISODIC


def stored(i: int, *, created: int = T, type: MemoryType = EP, scope: str = "", key: str = "",  # noqa: A002
           status: MemoryStatus = MemoryStatus.ACTIVE) -> Memory:
    return store_support.stored(i, f"turn {i}", created=created, type=type, scope=scope, key=key, status=status)


@pytest.fixture
def store(tmp_path: Path) -> TenantStore:
    s, _ = TenantStore.open(tmp_path, dim=DIM)
    yield s
    s.close()


def put(store: TenantStore, *memories: Memory) -> None:
    store_support.put(store, *memories, dim=DIM)


class FlatCalibration:
    """The calibration's fused model for candidates the hop adds: a fixed small probability."""

    def fused(self, features: dict[str, np.ndarray]) -> np.ndarray:
        return np.full(len(features["rrf"]), 0.001)


def candidates(ids: list[int], relevance: list[float]) -> Candidates:
    ids_a = np.asarray(ids, dtype=np.int64)
    rrf = np.linspace(1.0, 0.1, len(ids))
    return Candidates(ids=ids_a, rrf=rrf, rrf_norm=rrf, relevance=np.asarray(relevance, dtype=np.float64),
                      rerank=np.zeros(len(ids)), dense_ids=ids_a, dense_scores=np.linspace(0.9, 0.5, len(ids)),
                      features=fused_features(ids_a, rrf, ids_a, np.linspace(0.9, 0.5, len(ids)), ids_a[:0],
                                              np.zeros(0)))


def test_the_turns_beside_a_seed_in_its_scope_and_window(store: TenantStore) -> None:
    put(store, stored(0), stored(1, scope="work"), stored(2), stored(3), stored(4), stored(5, created=T + 90 * MIN),
        stored(6, type=MemoryType.SEMANTIC), stored(7, key="city"), stored(8, status=MemoryStatus.ARCHIVED), stored(9))
    # seed 3: before it 2, after it 4; the second either side is 0 (1 is another scope) and 9 (5 is outside the
    # window, 6 semantic, 7 a fact with a key, 8 archived).
    turns = expand.adjacent_turns(store, [3], radius=2, window_ms=30 * MIN)
    assert turns == [(2, 0), (4, 0), (0, 0), (9, 0)]
    assert expand.adjacent_turns(store, [3], radius=1, window_ms=30 * MIN) == [(2, 0), (4, 0)]


def test_seeds_and_repeats_are_left_out_and_a_non_turn_seed_adds_nothing(store: TenantStore) -> None:
    put(store, stored(0), stored(1), stored(2), stored(3, type=MemoryType.SEMANTIC))
    assert expand.adjacent_turns(store, [1, 2], radius=1, window_ms=MIN) == [(0, 0)]
    assert expand.adjacent_turns(store, [3], radius=1, window_ms=MIN) == []


def test_a_second_hop_turn_never_outranks_a_confident_first_round_hit() -> None:
    # seed 10 is very relevant (0.95); its neighbour would reach 0.2 x 0.95 = 0.19, but the first round holds a
    # confident hit at 0.5 and a weak one at 0.1: the turn lands between them, never above 0.5.
    cand = candidates([10, 20, 30], [0.95, 0.5, 0.1])
    out = expand.second_hop(cand, [(11, 0)], expand.seeds_of(cand), calibration=FlatCalibration())
    rel = dict(zip(out.ids.tolist(), out.relevance.tolist(), strict=True))
    assert rel[11] == pytest.approx(0.19) and rel[20] == 0.5 and rel[11] > rel[30]
    assert out.second.tolist() == [False, False, False, True]
    # with HOP high enough to pass 0.5, the cap holds it just below the lowest confident hit
    reach = expand.hop_relevance(np.array([0.95]), cand.relevance, hop=0.9)
    assert reach[0] < 0.5 and reach[0] == pytest.approx(0.5)


def test_the_hop_only_raises_a_turn_and_adds_each_once() -> None:
    cand = candidates([10, 11, 20], [0.9, 0.4, 0.3])
    seeds = expand.seeds_of(cand)
    assert seeds.tolist() == [0, 1]
    out = expand.second_hop(cand, [(11, 0), (12, 0), (20, 1)], seeds, calibration=FlatCalibration())
    assert out.ids.tolist() == [10, 11, 20, 12]               # 12 added once, nothing repeated
    assert out.relevance.tolist()[:3] == [0.9, 0.4, 0.3]      # 11 and 20 already above 0.2 x their seed
    assert out.relevance[3] == pytest.approx(0.18)
    assert out.second.tolist() == [False, False, False, True]
    assert np.isnan(out.rerank[3]) and out.rrf[3] == 0.0
    assert set(out.features) == set(cand.features) and all(len(v) == 4 for v in out.features.values())


def test_no_turns_leaves_the_candidates_as_they_are() -> None:
    cand = candidates([1, 2], [0.3, 0.2])
    assert expand.second_hop(cand, [], expand.seeds_of(cand), calibration=FlatCalibration()) is cand
    assert expand.seeds_of(candidates([1], [0.0])).tolist() == []
