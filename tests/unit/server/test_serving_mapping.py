"""The serving fields on the wire: the depth a query ran at, the controller's state in Info, and each
tenant's queue depth and rejections in Stats."""

from __future__ import annotations

from server.batching.controller import ControllerState
from server.domain import Timings
from server.grpc import mapping


def test_timings_carry_the_rerank_depth_used() -> None:
    assert mapping.timings_to_pb(Timings(batch_size=3, rerank_depth_used=7)).rerank_depth_used == 7


def test_rerank_control_maps_every_field() -> None:
    state = ControllerState(target_ms=250.0, full_depth=20, depth=6, ms_per_pair=1.5, ms_per_query=4.0, device="cpu",
                            batches_full=3, batches_reduced=2, batches_skipped=1)
    out = mapping.rerank_control_to_pb(state)
    assert (out.target_ms, out.full_depth, out.depth, out.ms_per_pair, out.ms_per_query, out.device) == (
        250.0, 20, 6, 1.5, 4.0, "cpu")
    assert (out.batches_full, out.batches_reduced, out.batches_skipped) == (3, 2, 1)


def test_stats_carry_each_tenants_queue_and_rejections() -> None:
    d = {"total_tenants": 1, "loaded_tenants": 1, "memory_budget_bytes": 0, "used_bytes": 0, "loads": 0,
         "evictions": 0, "load_ms_total": 0.0, "evict_ms_total": 0.0,
         "tenants": [{"tenant_id": "noisy", "state": "LOADED", "queued": 5, "rejected": 9}, {"tenant_id": "q", "state": "LOADED"}]}
    tenants = mapping.stats_to_pb(d).tenants
    assert [(t.queued, t.rejected) for t in tenants] == [(5, 9), (0, 0)]


def test_stats_carry_each_replica_and_the_replica_of_each_tenant() -> None:
    d = {"total_tenants": 2, "loaded_tenants": 1, "memory_budget_bytes": 0, "used_bytes": 10, "loads": 1,
         "evictions": 0, "load_ms_total": 1.0, "evict_ms_total": 0.0,
         "tenants": [{"tenant_id": "a", "state": "LOADED", "replica": "r1"}],
         "replicas": [{"replica": "r1", "node_id": "n1", "pid": 7, "loaded_tenants": 1, "used_bytes": 10,
                       "rss_bytes": 300, "disk_bytes": 40},
                      {"replica": "r2", "node_id": "n2", "pid": 8, "loaded_tenants": 0, "used_bytes": 0,
                       "rss_bytes": 200, "disk_bytes": 0}]}
    out = mapping.stats_to_pb(d)
    assert [t.replica for t in out.tenants] == ["r1"]
    assert [(r.replica, r.node_id, r.pid, r.loaded_tenants, r.used_bytes, r.rss_bytes, r.disk_bytes)
            for r in out.replicas] == [("r1", "n1", 7, 1, 10, 300, 40), ("r2", "n2", 8, 0, 0, 200, 0)]
    single = mapping.stats_to_pb({**d, "tenants": [{"tenant_id": "a", "state": "LOADED"}], "replicas": []})
    assert [t.replica for t in single.tenants] == [""] and not single.replicas
