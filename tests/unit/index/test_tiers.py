from __future__ import annotations

import pytest

from server.index.tiers import TierRules, choose_nlist, factory_string, should_build, training_size


def test_nlist_grows_with_n_and_respects_training_size() -> None:
    assert choose_nlist(1_000_000) == 4096
    assert choose_nlist(100_000) == 1024
    for n in (500, 3_000, 20_000, 100_000, 1_000_000):
        k = choose_nlist(n)
        assert k & (k - 1) == 0
        assert k * 30 <= n or k == 16
    assert choose_nlist(0) == 16
    assert training_size(4096, 1_000_000) == 4096 * 30
    assert training_size(4096, 10_000) == 10_000


def test_should_build_promotes_then_regrows() -> None:
    rules = TierRules(promote_at=1000)
    assert not should_build(999, rules=rules, built_n=0)
    assert should_build(1000, rules=rules, built_n=0)
    assert not should_build(2000, rules=rules, built_n=1000)       # not yet 4x
    assert should_build(16_000, rules=rules, built_n=1000)
    assert not should_build(10**6, rules=TierRules(promote_at=0), built_n=0)


def test_factory_strings() -> None:
    assert factory_string(4096, codes="SQ8", dim=384) == "IVF4096_HNSW32,SQ8"
    assert factory_string(64, codes="Flat", dim=384) == "IVF64_HNSW32,Flat"
    assert factory_string(64, codes="PQ", dim=384) == "IVF64_HNSW32,PQ48"
    with pytest.raises(ValueError):
        TierRules(codes="LSH").validate()
