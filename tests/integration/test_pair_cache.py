"""The pair-score cache through the real server with a tiny cross-encoder: a repeated query reuses its
logits (the cross-encoder scores nothing new), and a write that changes what the model reads of a memory
changes what is cached for it (a fresh logit, the model's own on the new text)."""

from __future__ import annotations

import pytest
from support import start_server

from server.text import memory_text

TENANT = "acme/pairs"
QUERY = "what tea does alice drink"


def _logits(client) -> dict[str, float]:  # type: ignore[no-untyped-def]
    result = client.search(TENANT, QUERY, top_k=10)
    return {h.memory.memory_id: h.breakdown.rerank for h in result.hits if h.breakdown.HasField("rerank")}


def test_repeats_are_cached_and_a_changing_write_changes_the_cached_logit(tmp_path, jvm, embedder,
                                                                         tiny_reranker) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, reranker=tiny_reranker,
                           search={"rerank_depth": 4, "latency_target_ms": 0},
                           memory={"dedupe_cosine": 0.95})   # the entity-adding rewrite below merges
    try:
        client = running.client()
        client.create_tenant(TENANT)
        written = client.write(TENANT, "Alice drinks green tea every morning.",
                               "Quarterly revenue grew by 12 percent in Berlin.",
                               "The deploy pipeline runs on Kubernetes nodes.", "Bob fixed the bicycle chain on Sunday.")
        alice = written.results[0].memory_id
        cache = running.app.engine.pair_cache
        first = _logits(client)
        assert alice in first and len(first) == 4
        misses, hits = cache.misses, cache.hits
        again = _logits(client)
        assert again == first
        assert cache.hits == hits + 4 and cache.misses == misses, "a repeated query is answered from the cache"
        # A near-duplicate write merges into Alice's memory and adds an entity its content does not name: the
        # text the cross-encoder reads changes, so the cached logit for it must not answer again.
        merged = client.write(TENANT, "Alice drinks green tea every morning.", entities=["Kyoto"])
        assert alice in (merged.results[0].merged_into, merged.results[0].memory_id)
        memory = running.app.engine.registry.loaded_shard(TENANT).store.get(alice)
        assert "Kyoto" in memory_text(memory)
        misses = cache.misses
        after = _logits(client)
        assert cache.misses == misses + 1, "only the changed memory is scored again"
        expected = float(tiny_reranker.score([(QUERY, memory_text(memory))])[0])
        assert after[alice] == pytest.approx(expected, abs=1e-4)
        assert after[alice] != pytest.approx(first[alice], abs=1e-6)
        assert {k: v for k, v in after.items() if k != alice} == {k: v for k, v in first.items() if k != alice}
    finally:
        running.stop()
