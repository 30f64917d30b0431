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
