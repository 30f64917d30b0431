"""Conversation threading on write: which previous turn an EPISODIC memory without a context is indexed with."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from server.domain import Memory, MemoryInput, MemoryStatus, MemoryType
from server.engine.conversation import thread_contexts
from server.store.memory_store import TenantStore
from tests import store_support
from tests.store_support import stored

DIM = 4
MIN = 60_000
EP = MemoryType.EPISODIC


@pytest.fixture
def store(tmp_path: Path) -> TenantStore:
    s, _ = TenantStore.open(tmp_path, dim=DIM)
    yield s
    s.close()


def put(store: TenantStore, *memories: Memory) -> None:
    store_support.put(store, *memories, dim=DIM)


def contexts(store: TenantStore, *inputs: MemoryInput, window_ms: int = 30 * MIN, now: int = 10**12) -> list[str]:
    return [m.context for m in thread_contexts(store, inputs, window_ms=window_ms, now_ms=now)]


def test_each_turn_of_one_write_gets_the_turn_before_it(store: TenantStore) -> None:
    t = 10**12
    turns = [MemoryInput(content=f"A: turn {i}", type=EP, created_at_ms=t) for i in range(3)]
    assert contexts(store, *turns) == ["", "A: turn 0", "A: turn 1"]


def test_the_first_turn_of_a_write_continues_from_the_store(store: TenantStore) -> None:
    t = 10**12
    put(store, stored(1, "A: older", created=t - 5 * MIN), stored(2, "B: same time, written first", created=t),
        stored(3, "A: same time, written last", created=t), stored(4, "C: later than the new turn", created=t + MIN))
    assert contexts(store, MemoryInput(content="B: next", type=EP, created_at_ms=t)) == ["A: same time, written last"]


def test_only_episodic_keyless_live_memories_of_the_same_scope_inside_the_window(store: TenantStore) -> None:
    t = 10**12
    put(store, stored(1, "A: the real previous turn", created=t - 20 * MIN),
        stored(2, "a semantic fact", created=t - MIN, type=MemoryType.SEMANTIC),
        stored(3, "A: another scope", created=t - MIN, scope="work"),
        stored(4, "A: a key slot", created=t - MIN, key="plan"),
        stored(5, "A: archived", created=t - MIN, status=MemoryStatus.ARCHIVED))
    new = MemoryInput(content="B: reply", type=EP, created_at_ms=t)
    assert contexts(store, new) == ["A: the real previous turn"]
    assert contexts(store, new, window_ms=10 * MIN) == [""]          # 20 minutes back: outside a 10-minute window
    assert contexts(store, new, window_ms=0) == [""]                 # off
    assert contexts(store, dataclasses.replace(new, scope="work")) == ["A: another scope"]


def test_what_is_not_threaded(store: TenantStore) -> None:
    t = 10**12
    put(store, stored(1, "A: hello", created=t))
    given = MemoryInput(content="B: hi", type=EP, created_at_ms=t, context="the writer's own context")
    fact = MemoryInput(content="B likes tea", type=MemoryType.SEMANTIC, created_at_ms=t)
    slot = MemoryInput(content="B: plan is X", type=EP, created_at_ms=t, key="plan")
    assert contexts(store, given, fact, slot) == ["the writer's own context", "", ""]


def test_a_context_is_one_turn_long(store: TenantStore) -> None:
    t = 10**12
    put(store, dataclasses.replace(stored(1, "A: second", created=t), context="A: first"))
    assert contexts(store, MemoryInput(content="B: third", type=EP, created_at_ms=t)) == ["A: second"]
