"""Access updates ride in one compact log record: applied, replayed, and harmless after a delete."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from server.store.memory_store import TenantStore
from server.store.wal import read_records
from tests.unit.store.test_columns import NOW, memory


def test_accesses_are_one_record_that_replays_to_the_same_memories(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    store, _ = TenantStore.open(tmp_path, dim=2)
    ms = [memory(d, rng) for d in range(1, 6)]
    store.commit(puts=[(m, np.zeros(2, np.float32)) for m in ms])
    touched = [dataclasses.replace(m, last_access_at_ms=NOW + i, access_count=m.access_count + 3, importance=0.75)
               for i, m in enumerate(ms[:3])]
    store.commit(accesses=touched, deletes=[ms[1].memory_id])  # one group: the delete wins
    ops = [meta["op"] for meta, _ in read_records(tmp_path / "memories.wal")]
    assert ops == ["put"] * 5 + ["acc", "del"]

    want = {m.memory_id: m for m in touched if m.memory_id != ms[1].memory_id}
    want.update({m.memory_id: m for m in ms[3:]})
    for s in (store, TenantStore.open(tmp_path, dim=2)[0]):
        assert {m.memory_id: m for m in s.all()} == want
        cols = s.columns()
        assert cols.last_access_ms[ms[0].doc_id] == NOW and cols.importance[ms[2].doc_id] == 0.75
        assert cols.status[ms[1].doc_id] == 0
