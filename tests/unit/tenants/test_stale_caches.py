"""Index caches a node kept from an earlier ownership of a tenant whose log another owner compacted since: the
history in between is gone from the log (a delete left no record to replay), so the Lucene index and the
dense snapshot must be rebuilt from the store, not caught up (TenantLog.compacted_seq)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from server.config import MemoryConfig
from server.domain import MemoryInput, WriteOutcome
from server.engine.write import commit_writes
from server.errors import StoreUnavailable
from server.index.tiers import TierRules
from server.store.object_wal import ObjectLogBackend
from server.tenants.shard import TenantShard
from tests.unit.store.s3_support import mocked, new_store

DIM = 8


@pytest.fixture()
def bucket() -> Iterator[None]:
    with mocked():
        yield


def node(owner: str) -> ObjectLogBackend:
    store, _ = new_store()
    return ObjectLogBackend(store=store, owner_id=owner, grace_s=0.0)


def write(shard: TenantShard, text: str, seed: int) -> str:
    vec = np.random.default_rng(seed).normal(size=(1, DIM)).astype(np.float32)
    vec /= np.linalg.norm(vec)
    with shard.write_lock:
        result, = commit_writes(shard, [MemoryInput(content=text)], vec, cfg=MemoryConfig(dedupe_cosine=0.99), now_ms=seed)
    assert result.outcome == WriteOutcome.CREATED, result
    return result.memory_id


def test_a_cache_older_than_another_owners_compaction_is_rebuilt(bucket: None, tmp_path: Path, jvm: None) -> None:
    a, b = node("node-a"), node("node-b")
    first = TenantShard.load("t", tmp_path / "a", dim=DIM, open_log=a.opener("t"))
    doomed = write(first, "the walrus sings at dawn", 1)
    write(first, "a quiet harbour town", 2)
    first.close()                                    # node A keeps its Lucene index and dense snapshot on disk

    second = TenantShard.load("t", tmp_path / "b", dim=DIM, open_log=b.opener("t"))
    with second.write_lock:
        second.purge_locked([doomed], key_id="k", now_ms=3, compact=False)
    write(second, "the lighthouse keeper", 4)
    assert second.compact() is not None              # the delete's record is gone from the log now
    second.close()

    again = TenantShard.load("t", tmp_path / "a", dim=DIM, open_log=a.opener("t"))   # A's stale caches
    assert again.store.get(doomed) is None and again.store.compacted_seq > 0
    live = {m.doc_id for m in again.store.all()}
    _, docs = again.lexical.search("walrus", 5)
    assert set(docs.tolist()) <= live and len(again.lexical.search("lighthouse", 5)[1]) == 1
    assert len(again.dense) == len(live) == 2
    again.close()


def test_a_new_owner_loads_the_ivf_index_the_last_compaction_stored(bucket: None, tmp_path: Path, jvm: None) -> None:
    """The IVF index rides beside the base in object storage: a node with an empty disk loads it (caught up
    with what was committed after the compaction) instead of training one."""
    rules = TierRules(promote_at=500, codes="Flat", nprobe=16, ef_search=32)
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(660, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cfg = MemoryConfig(dedupe_cosine=1.01)
    with ThreadPoolExecutor(1) as builder:
        first = TenantShard.load("t", tmp_path / "a", dim=DIM, rules=rules, builder=builder,
                                 open_log=node("node-a").opener("t"))
        with first.write_lock:
            commit_writes(first, [MemoryInput(content=f"memory {i}") for i in range(600)], vecs[:600], cfg=cfg,
                          now_ms=1)
        first.wait_built(60)
        assert first.dense.tier == "ivf"
        assert first.compact() is not None
        with first.write_lock:   # after the compaction: only in the log's segments
            commit_writes(first, [MemoryInput(content=f"memory {i}") for i in range(600, 660)], vecs[600:],
                          cfg=cfg, now_ms=2)
        expected = first.dense.search(vecs[:20], 5)[1]
        first.close()

        second = TenantShard.load("t", tmp_path / "b", dim=DIM, rules=rules, builder=builder,
                                  open_log=node("node-b").opener("t"))
        assert second.dense.tier == "ivf" and second.dense.builds == 0 and not second.building   # loaded, not trained
        assert len(second.dense) == 660
        assert np.array_equal(second.dense.search(vecs[:20], 5)[1], expected)
        second.close()


def test_the_registry_reloads_a_tenant_whose_commit_outcome_is_unknown(bucket: None, tmp_path: Path, jvm: None) -> None:
    """A failed commit to object storage latches the tenant's log (its outcome is unknown); the next request
    finds the shard closed for a reload and gets a fresh one, replayed and fenced, whose writes go through."""
    from server.tenants.catalog import Catalog
    from server.tenants.registry import TenantRegistry

    store, faults = new_store()
    backend = ObjectLogBackend(store=store, owner_id="node-a", grace_s=0.0)
    registry = TenantRegistry(data_dir=tmp_path, catalog=Catalog(tmp_path / "system"), dim=DIM,
                              open_log=backend.opener, drop_log=backend.drop_tenant)
    registry.create("t")
    shard = registry.shard("t")
    write(shard, "kept", 1)
    faults.refused = 10
    with pytest.raises(StoreUnavailable):
        write(shard, "refused", 2)
    faults.refused = 0
    assert shard.store.needs_reload
    again = registry.shard("t")
    assert again is not shard and shard.closed and not again.store.needs_reload
    assert [m.content for m in again.store.all()] == ["kept"]
    write(again, "after the reload", 3)
    assert registry.shard("t") is again
    registry.close()
