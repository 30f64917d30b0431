"""The operators' view of a Ray cluster (server/cluster/board.py), without Ray: replicas' records published to a
bucket (moto) and read back fresh, stale ones left out; Stats merged (totals summed, each loaded tenant with its
replica); /metrics merged (samples summed by name and labels, the longest pause the largest) with per-replica
gauges."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from server.cluster.board import Board, ReplicaCollector, merge_stats, publish
from tests.unit.store.s3_support import mocked, new_store


def exposition(*, rpcs: int, longest: float, loaded: int) -> str:
    registry = CollectorRegistry()
    Counter("engram_things_total", "Things.", ("kind",), registry=registry).labels("a").inc(rpcs)
    Gauge("engram_gc_pause_longest_seconds", "Longest pause.", registry=registry).set(longest)
    Gauge("engram_loaded_tenants", "Loaded.", registry=registry).set(loaded)
    return generate_latest(registry).decode()


def record(replica: str, tenants: list[str], *, rpcs: int, longest: float) -> dict:
    return {"replica": replica, "pid": 1, "node_id": "n1", "rss_bytes": 100, "disk_bytes": 10,
            "stats": {"loaded_tenants": len(tenants), "used_bytes": 1000 * len(tenants), "loads": len(tenants),
                      "evictions": 0, "load_ms_total": 1.0, "evict_ms_total": 0.0, "memory_budget_bytes": 0,
                      "tenants": [{"tenant_id": t, "state": "LOADED", "memories": 3} for t in tenants]},
            "metrics": exposition(rpcs=rpcs, longest=longest, loaded=len(tenants))}


def test_records_round_trip_and_stale_ones_are_left_out() -> None:
    with mocked():
        store, _ = new_store()
        publish(store, record("r1", ["a"], rpcs=1, longest=0.1))
        publish(store, record("r2", ["b"], rpcs=1, longest=0.1))
        board = Board(store)
        assert [r["replica"] for r in board.records()] == ["r1", "r2"]
        assert board.records(now_s=time.time() + 20) == []                 # both stale
        board.records(now_s=time.time() + 1000)                           # long gone: deleted
        assert store.keys("system/replicas/") == []


def test_stats_and_metrics_merge_across_replicas() -> None:
    records = [record("r1", ["acme", "globex"], rpcs=3, longest=0.5), record("r2", ["initech"], rpcs=4, longest=0.2)]
    stats = merge_stats(records, total_tenants=5)
    assert (stats["total_tenants"], stats["loaded_tenants"], stats["used_bytes"]) == (5, 3, 3000)
    assert [(t["tenant_id"], t["replica"]) for t in stats["tenants"]] == [("acme", "r1"), ("globex", "r1"),
                                                                          ("initech", "r2")]
    assert [(r["replica"], r["loaded_tenants"]) for r in stats["replicas"]] == [("r1", 2), ("r2", 1)]
    one = merge_stats(records, total_tenants=5, tenant_id="initech")
    assert [(t["tenant_id"], t["replica"]) for t in one["tenants"]] == [("initech", "r2")]
    assert merge_stats(records, total_tenants=5, tenant_id="cold")["tenants"] == [{"tenant_id": "cold",
                                                                                   "state": "UNLOADED"}]
    registry = CollectorRegistry()
    registry.register(ReplicaCollector(lambda: records))
    text = generate_latest(registry).decode()
    assert 'engram_things_total{kind="a"} 7.0' in text
    assert "engram_gc_pause_longest_seconds 0.5" in text
    assert "engram_loaded_tenants 3.0" in text
    assert "engram_cluster_replicas 2.0" in text
    assert 'engram_cluster_replica_loaded_tenants{node_id="n1",replica="r2"} 1.0' in text
    assert "acme" not in text                                             # no tenant label
