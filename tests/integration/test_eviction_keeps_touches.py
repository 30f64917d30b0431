"""Evicting a tenant commits what was only in memory: access touches from searches survive eviction."""

from __future__ import annotations

import time

from support import start_server


def test_touches_survive_eviction_and_reload(tmp_path, jvm, embedder) -> None:
    # A budget of one shard, no idle grace, and no periodic flush: only eviction can persist the touch.
    running = start_server(tmp_path / "data", embedder=embedder, lucene_commit_interval_s=3600.0,
                           tenants={"memory_budget_mb": 1}, evict_idle_s=0.0)
    try:
        client = running.client()
        client.create_tenant("a")
        client.create_tenant("b")
        memory_id = client.write("a", "the user's favourite tea is genmaicha").results[0].memory_id
        assert client.search("a", "favourite tea", top_k=1).hits[0].memory.memory_id == memory_id
        time.sleep(0.05)
        client.write("b", "tenant b's only memory")   # loading b evicts a
        stats = running.app.engine.registry.stats()
        assert stats["evictions"] >= 1, stats
        reloaded = client.get("a", memory_id).memories[0]
        assert reloaded.access_count == 1
        assert reloaded.last_access_at_ms > reloaded.created_at_ms
    finally:
        running.stop()
