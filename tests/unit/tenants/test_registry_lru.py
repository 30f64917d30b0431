"""The registry keeps loaded shards under a memory budget, evicting the least recently used idle one."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from server.config import MemoryConfig
from server.domain import MemoryInput
from server.engine.write import commit_writes
from server.tenants.catalog import Catalog
from server.tenants.registry import TenantRegistry
from server.tenants.shard import SHARD_FIXED_BYTES

DIM = 8


def make(tmp_path: Path, *, budget: int, idle_s: float = 0.0) -> TenantRegistry:
    return TenantRegistry(data_dir=tmp_path, catalog=Catalog(tmp_path / "system"), dim=DIM,
                          memory_budget_bytes=budget, evict_idle_s=idle_s)


def test_lru_eviction_under_budget_and_reload(tmp_path: Path, jvm: None) -> None:
    registry = make(tmp_path, budget=int(SHARD_FIXED_BYTES * 2.5))   # room for two shards
    for t in ("a", "b", "c"):
        registry.create(t)
    a = registry.shard("a")
    with a.write_lock:
        vec = np.ones((1, DIM), dtype=np.float32) / np.sqrt(DIM)
        commit_writes(a, [MemoryInput(content="alpha memory")], vec, cfg=MemoryConfig(), now_ms=1)
    registry.shard("b")
    registry.shard("a")                      # a is now the most recently used
    registry.shard("c")                      # over budget: b (least recently used) goes
    loaded = {s.tenant_id for s in registry.loaded()}
    assert loaded == {"a", "c"} and registry.evictions == 1
    assert registry.stats("b")["tenants"][0]["state"] == "UNLOADED"
    registry.shard("b")                      # reload; now a is the oldest
    assert {s.tenant_id for s in registry.loaded()} == {"c", "b"}
    again = registry.shard("a")              # a reloads with its memory, flushed on eviction
    assert [m.content for m in again.store.all()] == ["alpha memory"]
    assert again.lexical.search("alpha", 5)[1].tolist() == [again.store.all()[0].doc_id]
    assert registry.loads == 5
    registry.close()


def test_recently_used_shards_are_not_evicted(tmp_path: Path, jvm: None) -> None:
    registry = make(tmp_path, budget=1, idle_s=30.0)
    for t in ("a", "b"):
        registry.create(t)
    registry.shard("a")
    registry.shard("b")
    assert len(registry.loaded()) == 2 and registry.evictions == 0   # soft budget: both in use
    registry.evict_idle_s = 0.0
    time.sleep(0.01)
    assert registry.enforce_budget(keep="b") == 1
    assert [s.tenant_id for s in registry.loaded()] == ["b"]
    registry.close()


def test_loaded_shard_is_the_no_io_fast_path_only_without_a_budget(tmp_path: Path, jvm: None) -> None:
    registry = make(tmp_path / "free", budget=0)
    registry.create("a")
    assert registry.loaded_shard("a") is None          # not loaded: the caller takes the slow path
    assert registry.loaded_shard("nope") is None
    shard = registry.shard("a")
    before = shard.last_used_s
    time.sleep(0.01)
    assert registry.loaded_shard("a") is shard and shard.last_used_s > before
    registry.close()
    budgeted = make(tmp_path / "budget", budget=int(SHARD_FIXED_BYTES * 2.5))
    budgeted.create("a")
    budgeted.shard("a")
    assert budgeted.loaded_shard("a") is None           # every access must also enforce the budget
    budgeted.close()


def test_discard_commits_nothing_and_the_next_load_replays(tmp_path: Path, jvm: None) -> None:
    """A deposed copy (another owner took its log) is abandoned: its pending access touches are not
    committed, its local files go, and the next request loads the tenant afresh from its log."""
    registry = make(tmp_path, budget=0)
    registry.create("a")
    shard = registry.shard("a")
    with shard.write_lock:
        vec = np.ones((1, DIM), dtype=np.float32) / np.sqrt(DIM)
        commit_writes(shard, [MemoryInput(content="alpha memory")], vec, cfg=MemoryConfig(), now_ms=1)
    memory = shard.store.all()[0]
    seq = shard.store.seq
    shard.record_uses([memory.memory_id], now_ms=5_000)
    assert len(shard.touches) == 1
    assert registry.discard("a") is True and shard.closed
    assert shard.store.seq == seq                            # no access record was appended on the way out
    assert registry.loaded_shard("a") is None and not registry.directory("a").exists()
    assert registry.discard("a") is False                    # nothing loaded: nothing to discard
    again = registry.shard("a")                              # loads afresh (the local WAL went with the cache)
    assert again is not shard and not again.closed
    registry.close()
