"""The pair-score cache: keyed by tenant and both texts, bounded LRU, per-tenant forgetting, off at 0."""

from __future__ import annotations

from server.batching.pair_cache import PairScoreCache, pair_key


def test_same_texts_same_key_any_change_a_different_one() -> None:
    key = pair_key("acme", "what tea", "Alice drinks green tea.")
    assert key == pair_key("acme", "what tea", "Alice drinks green tea.")
    assert key != pair_key("acme", "what tea", "(Kyoto) Alice drinks green tea.")   # the memory changed
    assert key != pair_key("acme", "what teas", "Alice drinks green tea.")
    assert key != pair_key("other", "what tea", "Alice drinks green tea.")          # per tenant
    assert pair_key("a", "ab", "c") != pair_key("a", "a", "bc")                       # the texts are delimited


def test_get_put_lru_bound_and_counts() -> None:
    cache = PairScoreCache(max_entries=2)
    a, b, c = (pair_key("t", "q", m) for m in ("a", "b", "c"))
    assert cache.get_many([a, b]) == [None, None] and cache.misses == 2
    cache.put_many([a, b], [1.5, -2.0])
    assert cache.get_many([a, b]) == [1.5, -2.0] and cache.hits == 2
    cache.get_many([a])            # a is now the most recent
    cache.put_many([c], [0.25])    # evicts b, the least recently used
    assert cache.get_many([a, b, c]) == [1.5, None, 0.25] and len(cache) == 2


def test_forget_tenant_and_off() -> None:
    cache = PairScoreCache(max_entries=10)
    cache.put_many([pair_key("x", "q", "m"), pair_key("y", "q", "m")], [1.0, 2.0])
    assert cache.forget_tenant("x") == 1
    assert cache.get_many([pair_key("x", "q", "m"), pair_key("y", "q", "m")]) == [None, 2.0]
    off = PairScoreCache(max_entries=0)
    off.put_many([pair_key("x", "q", "m")], [1.0])
    assert not off.enabled and len(off) == 0 and off.get_many([pair_key("x", "q", "m")]) == [None]
