"""Months compressed: one tenant through hundreds of thousands of operations (write / search / touch /
delete cycles with a constant live set) on the real server. After compaction and audit retention start,
log bytes, audit bytes, RSS and restart time stay flat: they follow live data, not history."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import start_server

from benchmarks.durability.workload import Cycle, Run, cycle, measure


@pytest.mark.slow
def test_log_audit_rss_and_restart_stay_flat_over_many_operations(tmp_path: Path, jvm: None, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder,
                           storage={"min_free_mb": 0, "compact_min_mb": 0.5, "compact_ratio": 2.0},
                           memory={"audit_max_mb": 1})
    try:
        client = running.client()
        run = Run(tenant="long/run")
        client.create_tenant(run.tenant)
        points = []
        for i in range(1, 601):
            cycle(client, run, Cycle())
            if i % 50 == 0:
                points.append(running.call(_measured(running, run), timeout=300))
                print(points[-1], flush=True)
        assert run.operations >= 250_000, run.operations
        warm, late = points[:3], points[3:]
        log_cap = 2.0 * max(p["log_bytes"] for p in warm)
        assert all(p["log_bytes"] <= log_cap for p in late), [p["log_bytes"] for p in points]
        assert all(p["audit_bytes"] <= (1 << 20) * 1.3 for p in late), [p["audit_bytes"] for p in points]
        restart_cap = 3.0 * max(p["restart_ms"] for p in warm) + 100.0
        assert all(p["restart_ms"] <= restart_cap for p in late), [p["restart_ms"] for p in points]
        assert late[-1]["rss_bytes"] - warm[-1]["rss_bytes"] < 150 << 20, [p["rss_bytes"] for p in points]
        stats = running.app.engine.storage_stats()
        assert stats["compactions"] >= 3
    finally:
        running.stop()


async def _measured(running, run: Run) -> dict:  # type: ignore[no-untyped-def]
    import asyncio

    return await asyncio.get_running_loop().run_in_executor(running.app.engine.write_pool, measure, running.app, run)
