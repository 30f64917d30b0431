"""Crash safety: concurrent writes, supersedes and deletes against a server subprocess that is SIGKILLed at
random moments and restarted. The checks are in ``crash.verify`` (see its docstring); after the last kill a
copy of the data directory is also loaded offline and every index is compared with the store.

``COMPACTING`` makes automatic compaction run all the time (a log is due at 1.05 times its live data, from
10 KiB; maintenance every 0.3 s), so kills land before, during and after compactions; the server log must
show that compactions ran."""

from __future__ import annotations

import random
import shutil
import time
import traceback
from collections import Counter
from pathlib import Path

import pytest

from reliability.crash import Worker, WorkerModel, settle, verify
from reliability.proc import ServerProcess, free_port

TENANTS = ("crash/a", "crash/b")
WORKERS = 4
COMPACTING = {"ENGRAM_STORAGE__COMPACT_RATIO": "1.05", "ENGRAM_STORAGE__COMPACT_MIN_MB": "0.01"}


def run_crash_rounds(tmp_path: Path, *, kills: int, seed: int, dim: int, env: dict[str, str] | None = None,
                     ) -> Counter[str]:
    server = ServerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "server.log",
                           env={"ENGRAM_LUCENE_COMMIT_INTERVAL_S": "0.3", **(env or {})}).start()
    admin = server.client()
    for tenant in TENANTS:
        admin.create_tenant(tenant)
    models = [WorkerModel(tenant=TENANTS[i % len(TENANTS)]) for i in range(WORKERS)]
    rng = random.Random(seed)
    totals: Counter[str] = Counter()
    try:
        for round_no in range(kills):
            workers = [Worker(index=i, client=server.client(), model=models[i], seed=rng.randrange(2**32),
                              first_n=len(models[i].sent_tokens)) for i in range(WORKERS)]
            errors: list[str] = []
            for w in workers:
                w.run = _capturing(w.run, errors)  # type: ignore[method-assign]
                w.start()
            time.sleep(rng.uniform(0.3, 1.5))
            server.kill()
            for w in workers:
                w.join(60)
            if errors:
                pytest.fail("\n".join(errors))
            if round_no == kills - 1:
                shutil.copytree(tmp_path / "data", tmp_path / "after-last-kill")
            server.port = free_port()
            server.start()
            client = server.client()
            totals.update(verify(client, models))
            settle(client, models)
            totals["kills"] += 1
        totals["acked_ops"] = sum(m.acked_ops for m in models)
    finally:
        server.stop()
    totals["compactions"] = server.log_text().count("log compacted")
    totals.update(check_indexes_offline(tmp_path / "after-last-kill", dim=dim))
    return totals


def _capturing(run, errors: list[str]):  # type: ignore[no-untyped-def]
    def wrapped() -> None:
        try:
            run()
        except BaseException:  # noqa: BLE001 - reported by the test thread
            errors.append(traceback.format_exc())

    return wrapped


def check_indexes_offline(data_dir: Path, *, dim: int) -> Counter[str]:
    """Loads each tenant's shard from a crashed data dir as the server would, and compares every index
    with the store: no index holds a document the store lacks, and the store's memories are all indexed."""
    from server.tenants.registry import tenant_dirname
    from server.tenants.shard import TenantShard

    counts: Counter[str] = Counter()
    for tenant in TENANTS:
        shard = TenantShard.load(tenant, data_dir / "tenants" / tenant_dirname(tenant), dim=dim)
        try:
            memories = shard.store.all()
            assert shard.lexical.count() == len(memories), "lexical index and store disagree"
            assert len(shard.dense) == len(memories), "dense index and store disagree"
            dense_ids, _ = shard.dense.export()
            assert sorted(dense_ids.tolist()) == sorted(m.doc_id for m in memories), "dense index and store differ"
            for memory in memories:
                _, ids = shard.lexical.search(memory.content.split()[0], 3)
                assert memory.doc_id in ids.tolist(), memory.memory_id
                for doc in ids.tolist():
                    assert shard.store.by_doc(doc) is not None, f"lexical index returns doc {doc} the store lacks"
            counts["offline_checked"] += len(memories)
        finally:
            shard.close()
    return counts


def test_sigkill_during_writes_and_compactions_loses_no_acknowledged_write(tmp_path: Path, jvm: None,
                                                                          embedder) -> None:
    totals = run_crash_rounds(tmp_path, kills=2, seed=7, dim=embedder.dim, env=COMPACTING)
    assert totals["kills"] == 2 and totals["present"] > 0 and totals["searched"] > 0, totals
    assert totals["compactions"] > 0, totals


@pytest.mark.slow
def test_twenty_five_sigkills(tmp_path: Path, jvm: None, embedder) -> None:
    totals = run_crash_rounds(tmp_path, kills=25, seed=2026, dim=embedder.dim)
    assert totals["kills"] == 25 and totals["deleted"] > 0 and totals["superseded"] > 0, totals


@pytest.mark.slow
def test_sigkills_while_compactions_run(tmp_path: Path, jvm: None, embedder) -> None:
    totals = run_crash_rounds(tmp_path, kills=12, seed=22, dim=embedder.dim, env=COMPACTING)
    assert totals["kills"] == 12 and totals["deleted"] > 0 and totals["superseded"] > 0, totals
    assert totals["compactions"] >= 12, totals
