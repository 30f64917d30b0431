"""What a new owner of a tenant waits for: the take-over of a log in the bucket (owner record, replay, fence), by the
number of Writes the tenant had, with the segment rule (server/store/object_wal.py ``segments_due``: compacted once
256 segments follow the base) and with the byte rule alone (a log of puts is all live, so it never compacts).

    .venv/bin/python -m benchmarks.cluster.takeover [--writes 250,1000,4000] [--rounds 3]

A real S3 server (SeaweedFS ``weed mini``, benchmarks/cluster/stack.py). For each rule and each count one tenant
gets that many commits of one 384-d memory each through ``TenantStore.commit`` (the store a shard replica writes
through), the registry's compaction check after each (``compaction_due``, then ``compact`` as the background
compactor would), then a fresh data dir takes it over ``--rounds`` times (``TenantStore.open``: a replica's load of
the log, before any index is built); the median is reported with the segments the take-over read. Writes
benchmarks/results/cluster/takeover.json and .png.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cluster.stack import BUCKET, RESULTS, bucket
from server.domain import Memory, MemoryStatus, MemoryType

DIM = 384


def memory(i: int) -> Memory:
    return Memory(memory_id=f"m_{i:07d}", doc_id=i, content=f"note {i}: the sensor in room {i % 17} read {i * 7 % 101}",
                  type=MemoryType.EPISODIC, importance=0.5, created_at_ms=1000 + i, last_access_at_ms=1000 + i,
                  access_count=0, entities=(), source_ref="", scope="", confidence=1.0, key="",
                  status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="", pinned=False, expires_at_ms=0,
                  metadata={}, source_refs=(), updated_at_ms=1000 + i)


def vector(i: int) -> np.ndarray:
    v = np.random.default_rng(i).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def measure(endpoint: str, writes: int, floor: int, rounds: int, root: Path) -> dict[str, Any]:
    from server.store.memory_store import TenantStore
    from server.store.object_wal import ObjectLogBackend
    from server.store.s3 import ObjectStore, make_client

    client = make_client(endpoint=endpoint, region="us-east-1", access_key="any", secret_key="any", timeout_s=5)
    tenant = f"t-{floor}-{writes}-{time.time_ns()}"
    backend = ObjectLogBackend(store=ObjectStore(client, bucket=BUCKET), owner_id="writer", grace_s=0.0,
                               compact_segments=floor)
    store, _ = TenantStore.open(root / tenant / "w", dim=DIM, open_log=backend.opener(tenant))
    compactions = 0
    started = time.perf_counter()
    for i in range(1, writes + 1):
        store.commit(puts=[(memory(i), vector(i))])
        if store.compaction_due(ratio=2.0, min_bytes=4 << 20):
            store.compact()
            compactions += 1
    write_s = time.perf_counter() - started
    store._wal.objects.collect()   # grace 0: what the bases stand for leaves the bucket now
    store.close()
    takeovers, segments = [], 0
    for r in range(rounds):
        taker = dataclasses.replace(backend, owner_id=f"taker-{r}")
        t0 = time.perf_counter()
        again, _ = TenantStore.open(root / tenant / f"r{r}", dim=DIM, open_log=taker.opener(tenant))
        takeovers.append(time.perf_counter() - t0)
        assert len(again) == writes, (len(again), writes)
        segments = again._wal.objects.segments_past_base
        again.close()
    return {"writes": writes, "floor": floor, "compactions": compactions, "write_s": round(write_s, 2),
            "takeover_s": [round(x, 3) for x in takeovers], "takeover_median_s": round(statistics.median(takeovers), 3),
            "segments_read_past_base": segments}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for floor, label in ((0, "byte rule only"), (256, "segment rule (256)")):
        pts = [(r["writes"], r["takeover_median_s"]) for r in rows if r["floor"] == floor]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xlabel("Writes the tenant had (one memory each)")
    ax.set_ylabel("take-over of its log, median s")
    ax.set_title("A new owner's replay from SeaweedFS")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.ingest.run import cpu_model

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--writes", default="250,1000,4000")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    counts = [int(x) for x in args.writes.split(",") if x.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="engram-takeover-") as tmp, bucket(Path(tmp) / "weed") as endpoint:
        for n in counts:
            for floor in (0, 256):   # side by side for each count
                rows.append(measure(endpoint, n, floor, args.rounds, Path(tmp)))
                print(json.dumps(rows[-1]))  # noqa: T201 (a benchmark's console output)
    out = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": cpu_model(),
           "command": "python -m benchmarks.cluster.takeover " + " ".join(argv if argv is not None else sys.argv[1:]),
           "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "takeover.json").write_text(json.dumps(out, indent=1) + "\n")
    plot(rows, args.out / "takeover.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
