"""The query-embedding cache: per tenant, bounded by age and by entries, frozen vectors."""

from __future__ import annotations

import numpy as np
import pytest

from server.batching.query_cache import QueryEmbeddingCache


class Clock:
    def __init__(self) -> None:
        self.now_ns = 0

    def __call__(self) -> int:
        return self.now_ns


def vec(x: float) -> np.ndarray:
    return np.full(4, x, dtype=np.float32)


def test_hit_within_the_window_and_miss_after_it() -> None:
    clock = Clock()
    cache = QueryEmbeddingCache(ttl_ms=100, max_entries=8, clock_ns=clock)
    assert cache.get("t", "q") is None
    cache.put("t", "q", vec(1))
    clock.now_ns = 99_000_000
    np.testing.assert_array_equal(cache.get("t", "q"), vec(1))
    clock.now_ns = 101_000_000
    assert cache.get("t", "q") is None
    assert len(cache) == 0 and cache.hits == 1 and cache.misses == 2


def test_entries_are_per_tenant() -> None:
    cache = QueryEmbeddingCache(ttl_ms=1000, max_entries=8)
    cache.put("a", "same text", vec(1))
    assert cache.get("b", "same text") is None
    assert cache.get("a", "same text") is not None
    assert cache.forget_tenant("a") == 1 and cache.get("a", "same text") is None


def test_least_recently_used_goes_first() -> None:
    cache = QueryEmbeddingCache(ttl_ms=1000, max_entries=2)
    cache.put("t", "one", vec(1))
    cache.put("t", "two", vec(2))
    assert cache.get("t", "one") is not None      # "two" is now the least recently used
    cache.put("t", "three", vec(3))
    assert cache.get("t", "two") is None
    assert cache.get("t", "one") is not None and cache.get("t", "three") is not None


def test_cached_vectors_are_copies_and_read_only() -> None:
    cache = QueryEmbeddingCache(ttl_ms=1000, max_entries=2)
    original = vec(1)
    cache.put("t", "q", original)
    original[:] = 5
    got = cache.get("t", "q")
    assert got is not None and float(got[0]) == 1.0
    with pytest.raises(ValueError):
        got[0] = 2


@pytest.mark.parametrize("ttl_ms, entries", [(0, 8), (100, 0)])
def test_disabled_cache_stores_nothing(ttl_ms: float, entries: int) -> None:
    cache = QueryEmbeddingCache(ttl_ms=ttl_ms, max_entries=entries)
    cache.put("t", "q", vec(1))
    assert cache.get("t", "q") is None and len(cache) == 0
