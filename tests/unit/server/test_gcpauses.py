"""The garbage collector tuned for a server (tenants.gc_tuning: young threshold, loaded tenants frozen), and its
passes timed for /metrics."""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from server import gcpauses
from server.config import MemoryConfig
from server.domain import MemoryInput
from server.engine.write import commit_writes
from server.gcpauses import YOUNG_THRESHOLD, GcPauses, freeze_loaded, tune
from server.metrics import GC_COLLECTIONS, GC_FROZEN, GC_PAUSE_SECONDS, Metrics
from server.tenants.catalog import Catalog
from server.tenants.registry import TenantRegistry

DIM = 8


@pytest.fixture
def thawed() -> Iterator[None]:
    """Each test starts and ends with nothing frozen."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def _registry(tmp_path: Path, *, gc_freeze: bool) -> TenantRegistry:
    return TenantRegistry(data_dir=tmp_path, catalog=Catalog(tmp_path / "system"), dim=DIM, gc_freeze=gc_freeze)


def _write(registry: TenantRegistry, tenant: str, n: int) -> None:
    shard = registry.shard(tenant)
    vecs = np.random.default_rng(0).standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with shard.write_lock:
        commit_writes(shard, [MemoryInput(content=f"memory number {i} about topic {i % 7}") for i in range(n)], vecs,
                      cfg=MemoryConfig(), now_ms=1)


def test_tune_raises_only_the_young_threshold() -> None:
    before = gc.get_threshold()
    try:
        tune()
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
    finally:
        gc.set_threshold(*before)


def test_freeze_loaded_moves_the_live_objects_out_of_reach(thawed: None) -> None:
    held = [[i] for i in range(10_000)]   # 10k tracked objects
    frozen = freeze_loaded()
    # Threads left running by earlier tests in the process may free frozen objects in between (the count only
    # falls without another freeze), so the count read afterwards is at most what the freeze reported.
    assert len(held) <= gc.get_freeze_count() <= frozen
    assert all(len(gc.get_objects(generation)) < len(held) for generation in range(3))


@pytest.mark.parametrize("gc_freeze", [True, False])
def test_the_registry_freezes_after_each_load_only_when_asked(tmp_path: Path, jvm: None, thawed: None,
                                                             gc_freeze: bool) -> None:
    registry = _registry(tmp_path, gc_freeze=gc_freeze)
    registry.create("a")
    _write(registry, "a", 50)
    registry.evict("a")
    gc.unfreeze()
    registry.shard("a")   # reloads: every memory is an object again
    assert (gc.get_freeze_count() > 0) is gc_freeze
    registry.close()


def test_paused_turns_the_collector_off_until_the_last_of_nested_loads_ends() -> None:
    assert gc.isenabled()
    with gcpauses.paused():
        assert not gc.isenabled()
        with gcpauses.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()   # the outer load still runs
    assert gc.isenabled()
    gc.disable()
    try:
        with gcpauses.paused():
            pass
        assert not gc.isenabled()   # off before: left off
    finally:
        gc.enable()


def test_the_registry_loads_with_the_collector_paused(tmp_path: Path, jvm: None, thawed: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from server.tenants import shard as shard_module

    registry = _registry(tmp_path, gc_freeze=True)
    registry.create("a")
    _write(registry, "a", 10)
    registry.evict("a")
    seen: list[bool] = []
    real = shard_module.TenantShard.load

    def load(*args: object, **kw: object) -> object:
        seen.append(gc.isenabled())
        return real(*args, **kw)

    monkeypatch.setattr(shard_module.TenantShard, "load", load)
    registry.shard("a")
    assert seen == [False] and gc.isenabled()
    registry.close()


def test_a_closed_shard_is_freed_without_the_collector(tmp_path: Path, jvm: None, thawed: None) -> None:
    """What makes freezing safe: an evicted shard's objects go by reference counting alone, so freezing them
    leaks nothing."""
    registry = _registry(tmp_path, gc_freeze=True)
    registry.create("a")
    _write(registry, "a", 200)
    registry.evict("a")
    shard = registry.shard("a")
    assert gc.get_freeze_count() > 0
    alive, memory = weakref.ref(shard), weakref.ref(shard.store)
    gc.disable()
    try:
        registry.evict("a")
        del shard
        assert alive() is None and memory() is None
    finally:
        gc.enable()
    registry.close()


def test_gc_pauses_times_each_pass_by_generation_and_stops_at_close() -> None:
    pauses = GcPauses.install()
    try:
        gc.collect(2)
        gc.collect(0)
        snap = pauses.snapshot()
        assert snap["collections"][2] >= 1 and snap["collections"][0] >= 1
        assert snap["seconds"][2] > 0 and 0 < snap["longest_s"][2] <= snap["seconds"][2]
    finally:
        pauses.close()
    before = pauses.snapshot()["collections"][2]
    gc.collect(2)
    assert pauses.snapshot()["collections"][2] == before and pauses._callback not in gc.callbacks


def test_a_long_pass_is_logged(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(gcpauses, "WARN_S", 0.0)
    pauses = GcPauses.install()
    try:
        with caplog.at_level(logging.WARNING, logger="server.gcpauses"):
            gc.collect(2)
    finally:
        pauses.close()
    assert any("garbage collector (generation 2) paused" in r.getMessage() for r in caplog.records)


def test_metrics_export_the_passes() -> None:
    from prometheus_client import generate_latest

    pauses = GcPauses.install()
    metrics = Metrics()
    try:
        metrics.watch(batchers=[], loaded_tenants=lambda: 0, gc_pauses=pauses.snapshot)
        gc.collect(2)
        text = generate_latest(metrics.registry).decode()
    finally:
        pauses.close()
    assert f'{GC_COLLECTIONS}_total{{generation="2"}}' in text
    assert f'{GC_PAUSE_SECONDS}_total{{generation="2"}}' in text and f"{GC_FROZEN} " in text
    line = next(x for x in text.splitlines() if x.startswith(f'{GC_COLLECTIONS}_total{{generation="2"}}'))
    assert float(line.split()[-1]) >= 1
