"""The rebuild of a lexical index that a full disk left stale: searches running meanwhile never meet a closed
index (and see the last commit, then the rebuild), and a rebuild that meets a full disk again backs off
instead of running every flush interval."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from server.config import MemoryConfig
from server.domain import MemoryInput
from server.engine.write import commit_writes
from server.lexical.lucene import LuceneIndex
from server.tenants import lexical_slot as slot_module
from server.tenants.shard import TenantShard

DIM = 8
CFG = MemoryConfig(dedupe_cosine=1.01)


def loaded(tmp_path: Path, n: int) -> TenantShard:
    shard = TenantShard.load("t", tmp_path / "t", dim=DIM)
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    with shard.write_lock:
        commit_writes(shard, [MemoryInput(content=f"heron note {i} by the river") for i in range(n)],
                      vecs / np.linalg.norm(vecs, axis=1, keepdims=True), cfg=CFG, now_ms=1_700_000_000_000)
    shard.flush()   # the periodic Lucene commit: what a swapped-in index reads until its rebuild is refreshed
    return shard


def test_searches_during_repairs_never_meet_a_closed_index(tmp_path: Path, jvm: None) -> None:
    shard = loaded(tmp_path, 300)
    errors: list[BaseException] = []
    counts: list[int] = []
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            try:
                counts.append(len(shard.lexical.search("heron river", 10)[1]))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    threads = [threading.Thread(target=search) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(5):
            shard.lexical_stale = True
            assert shard.repair_lexical()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:1]
    assert counts and set(counts) == {10}
    shard.close()


def test_a_rebuild_that_meets_a_full_disk_backs_off(tmp_path: Path, jvm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    shard = loaded(tmp_path, 20)
    shard.lexical_stale = True

    def full(self: LuceneIndex, seq: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(slot_module, "REPAIR_BACKOFF_S", (0.3, 60.0))
    with monkeypatch.context() as m:
        m.setattr(LuceneIndex, "commit", full)
        assert shard.repair_due()
        assert not shard.repair_lexical()
        assert shard.lexical_stale and not shard.repair_due()      # waits its backoff
    time.sleep(0.35)
    assert shard.repair_due() and shard.repair_lexical()
    assert not shard.lexical_stale and len(shard.lexical.search("heron", 50)[1]) == 20
    shard.close()
