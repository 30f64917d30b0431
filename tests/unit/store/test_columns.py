"""The store's doc columns against the ``Memory`` objects they mirror, and the vectorised filter
against ``Filter.matches`` on random memories and random filters."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from server.domain import Filter, Memory, MemoryStatus, MemoryType, SearchQuery
from server.store.columns import DocColumns, columnar, keep_mask
from server.store.memory_store import TenantStore

NOW = 1_800_000_000_000


def memory(doc_id: int, rng: np.random.Generator) -> Memory:
    return Memory(memory_id=f"m{doc_id}", doc_id=doc_id, content=f"memory {doc_id}",
                  type=MemoryType(int(rng.integers(1, 4))), importance=float(rng.random()),
                  created_at_ms=NOW - int(rng.integers(0, 10**9)), last_access_at_ms=NOW - int(rng.integers(0, 10**9)),
                  access_count=0, entities=(), source_ref="", scope="", confidence=1.0, key="",
                  status=MemoryStatus(int(rng.integers(1, 6))), supersedes=(), superseded_by="",
                  pinned=bool(rng.random() < 0.2),
                  expires_at_ms=int(rng.choice([0, NOW - 1000, NOW, NOW + 1000])), metadata={}, source_refs=(),
                  updated_at_ms=NOW)


def random_filter(rng: np.random.Generator) -> Filter:
    def some(enum: type) -> frozenset:
        return frozenset(v for v in enum if rng.random() < 0.4) if rng.random() < 0.5 else frozenset()
    pick = lambda: int(NOW - rng.integers(0, 10**9)) if rng.random() < 0.3 else 0
    return Filter(types=some(MemoryType), statuses=some(MemoryStatus), created_after_ms=pick(),
                  created_before_ms=pick(), accessed_after_ms=pick(), accessed_before_ms=pick(),
                  min_importance=float(rng.random()) if rng.random() < 0.3 else None)


def test_keep_mask_agrees_with_filter_matches() -> None:
    rng = np.random.default_rng(7)
    cols = DocColumns(capacity=4)  # grows several times below
    memories = {d: memory(d, rng) for d in range(1, 400) if rng.random() < 0.8}
    for m in memories.values():
        cols.set(m)
    for d in list(memories)[:20]:  # deleted docs read as absent
        cols.clear(d)
        del memories[d]
    ids = np.concatenate([rng.integers(-1, 450, size=300), [-1, 0, 10**6]]).astype(np.int64)
    for trial in range(300):
        query = SearchQuery(text="q", filter=random_filter(rng), include_history=bool(trial % 3 == 0),
                            include_pending=bool(trial % 5 == 0))
        statuses = query.effective_statuses()
        now = NOW if trial % 2 else 0
        got = keep_mask(cols.view(), ids, query.filter, statuses, now)
        want = [d in memories and query.filter.matches(memories[d], statuses=statuses, now_ms=now)
                for d in ids.tolist()]
        assert got.tolist() == want, trial


def test_columnar_only_for_fields_the_columns_hold() -> None:
    assert columnar(Filter()) and columnar(Filter(types=frozenset({MemoryType.EPISODIC}), min_importance=0.5))
    assert not columnar(Filter(scope="work"))
    assert not columnar(Filter(key="budget"))
    assert not columnar(Filter(entities_any=frozenset({"Ada"})))
    assert not columnar(Filter(entities_all=frozenset({"Ada"})))


def test_the_store_keeps_its_columns_through_puts_updates_deletes_and_replay(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    store, _ = TenantStore.open(tmp_path, dim=4)
    vec = np.ones(4, dtype=np.float32)
    first = [memory(d, rng) for d in range(1, 3000)]  # past the initial capacity
    store.commit(puts=[(m, vec) for m in first])
    updated = dataclasses.replace(first[5], last_access_at_ms=NOW, importance=0.9, status=MemoryStatus.SUPERSEDED)
    store.commit(updates=[updated])
    store.commit(deletes=[first[7].memory_id, first[8].memory_id])

    def check(s: TenantStore) -> None:
        cols = s.columns()
        for m in first:
            live = s.by_doc(m.doc_id)
            if live is None:
                assert cols.status[m.doc_id] == 0
                continue
            assert (cols.status[m.doc_id], cols.type[m.doc_id], cols.pinned[m.doc_id]) == (
                live.status, live.type, live.pinned)
            assert (cols.importance[m.doc_id], cols.created_ms[m.doc_id], cols.last_access_ms[m.doc_id],
                    cols.expires_ms[m.doc_id]) == (live.importance, live.created_at_ms, live.last_access_at_ms,
                                                   live.expires_at_ms)

    check(store)
    assert store.columns().status[first[5].doc_id] == MemoryStatus.SUPERSEDED
    assert store.columns().last_access_ms[first[5].doc_id] == NOW
    reopened, _ = TenantStore.open(tmp_path, dim=4)
    check(reopened)


@pytest.mark.parametrize("capacity", [1, 5])
def test_growth_keeps_rows_and_hands_out_whole_views(capacity: int) -> None:
    rng = np.random.default_rng(capacity)
    cols = DocColumns(capacity=capacity)
    before = cols.view()
    ms = [memory(d, rng) for d in (3, 17, 100)]
    for m in ms:
        cols.set(m)
    after = cols.view()
    assert len(before) == capacity and len(after) >= 101  # an old view stays whole, at its old length
    assert {len(getattr(after, f)) for f in after.__dataclass_fields__} == {len(after)}
    assert [int(after.status[m.doc_id]) for m in ms] == [int(m.status) for m in ms]
