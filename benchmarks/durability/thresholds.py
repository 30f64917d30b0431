"""``python -m benchmarks.durability.thresholds``: the measurements behind the defaults of ``storage.compact_ratio``,
``storage.compact_min_mb`` and ``storage.min_free_mb`` (README "Disk use").

For logs of 0.5 to 64 MiB, half of it live (what a log holds when ratio 2 makes it due), on the store itself
(``TenantStore``, 384-d vectors as the default embedder writes them): the replay time of a restart, the
compaction time, and the longest commit a concurrent writer saw while it ran (the write pause: the tail copy
and swap hold the store's lock) against the longest one without a compaction. Beside them, the fixed cost of
a shard load (Lucene open on an empty tenant), and the bytes per memory of the log and of Lucene, which size
the watermark. Writes JSON under ``benchmarks/results/durability/thresholds.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from server.domain import Memory, MemoryStatus, MemoryType
from server.store.memory_store import TenantStore

OUT = Path(__file__).resolve().parents[1] / "results" / "durability"
DIM = 384
SIZES_MB = (0.5, 1, 2, 4, 8, 16, 32, 64)


def _memory(i: int) -> Memory:
    return Memory(memory_id=f"m_{i:08d}", doc_id=i, content=f"note {i} about the walnut harbor and item{i} " * 3,
                  type=MemoryType.EPISODIC, importance=0.5, created_at_ms=1000 + i, last_access_at_ms=1000 + i,
                  access_count=0, entities=(), source_ref=f"chat-{i // 10}#{i % 10}", scope="", confidence=1.0,
                  key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="", pinned=False,
                  expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=1000 + i)


def _vector(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def build_log(directory: Path, *, size_bytes: int, live_fraction: float = 0.5) -> TenantStore:
    """A store whose log is ``size_bytes``, ``live_fraction`` of it live memories; the rest is history
    (memories written then deleted, access records of the live ones)."""
    rng = np.random.default_rng(0)
    store, _ = TenantStore.open(directory, dim=DIM)
    n = 0
    while store.log_bytes < size_bytes * live_fraction:
        store.commit(puts=[(_memory(i), _vector(rng)) for i in store.allocate_doc_ids(64)])
    live = store.all()
    while store.log_bytes < size_bytes:
        doomed = [_memory(i) for i in store.allocate_doc_ids(16)]
        n += 16
        store.commit(puts=[(m, _vector(rng)) for m in doomed])
        store.commit(deletes=[m.memory_id for m in doomed])
        store.commit(accesses=[dataclasses.replace(m, access_count=m.access_count + 1)
                               for m in live[(n * 7) % len(live):][:64]])
    return store


def _commit_latencies(store: TenantStore, stop: threading.Event, out: list[float]) -> None:
    """One put per commit, every 2 ms, until ``stop`` (doc ids follow the store's: its columns are dense)."""
    rng = np.random.default_rng(1)
    while not stop.is_set():
        m = _memory(store.allocate_doc_ids(1)[0])
        started = time.perf_counter()
        store.commit(puts=[(m, _vector(rng))])
        out.append(time.perf_counter() - started)
        time.sleep(0.002)


def measure_size(size_mb: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="thresholds-", dir=os.environ.get("ENGRAM_BENCH_TMP")) as tmp:
        directory = Path(tmp)
        store = build_log(directory, size_bytes=int(size_mb * (1 << 20)))
        live, log_bytes = len(store), store.log_bytes
        store.close()
        started = time.perf_counter()
        store, _ = TenantStore.open(directory, dim=DIM)
        replay_ms = (time.perf_counter() - started) * 1000.0
        # the writer alone, then the writer during a compaction
        baseline: list[float] = []
        stop = threading.Event()
        writer = threading.Thread(target=_commit_latencies, args=(store, stop, baseline))
        writer.start()
        time.sleep(1.0)
        stop.set()
        writer.join()
        during: list[float] = []
        stop = threading.Event()
        writer = threading.Thread(target=_commit_latencies, args=(store, stop, during))
        writer.start()
        started = time.perf_counter()
        plan = store.begin_compaction()
        assert plan is not None
        compacted = store.run_compaction(plan)
        compact_ms = (time.perf_counter() - started) * 1000.0
        stop.set()
        writer.join()
        store.close()
        started = time.perf_counter()
        store, _ = TenantStore.open(directory, dim=DIM)
        replay_after_ms = (time.perf_counter() - started) * 1000.0
        store.close()
    return {"log_mb": log_bytes / (1 << 20), "live_memories": live, "compacted_mb": compacted / (1 << 20),
            "replay_ms": replay_ms, "replay_after_compaction_ms": replay_after_ms, "compact_ms": compact_ms,
            "commit_max_ms_without": max(baseline) * 1000.0, "commit_max_ms_during": max(during) * 1000.0,
            "commit_p50_ms": float(np.median(baseline)) * 1000.0, "commits_during": len(during)}


def shard_fixed_cost(repeats: int = 5) -> dict[str, float]:
    """What every shard load costs beside the replay: an empty tenant loaded (Lucene opened) ``repeats`` times;
    and Lucene's bytes per memory (20k memories of the benchmark's text, committed, then force-merged)."""
    from server import lexical
    from server.lexical.lucene import LuceneIndex
    from server.tenants.shard import TenantShard

    lexical.start(heap_mb=1024)
    times = []
    with tempfile.TemporaryDirectory(prefix="thresholds-shard-") as tmp:
        for _ in range(repeats):
            started = time.perf_counter()
            TenantShard.load("bench/empty", Path(tmp), dim=DIM).close()
            times.append((time.perf_counter() - started) * 1000.0)
        index = LuceneIndex.open(Path(tmp) / "lucene-size")
        n = 20_000
        index.upsert([(i + 1, _memory(i).content) for i in range(n)])
        index.commit(1)
        lucene_bytes = index.disk_bytes()
        index.close()
    return {"empty_shard_load_ms_median": float(np.median(times[1:] or times)),
            "lucene_bytes_per_memory": lucene_bytes / n}


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = report["points"]
    mb = [p["log_mb"] for p in points]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    axes[0].plot(mb, [p["replay_ms"] for p in points], marker=".", label="replay (restart) of the log")
    axes[0].plot(mb, [p["replay_after_compaction_ms"] for p in points], marker=".", label="after compaction")
    axes[0].axhline(report["empty_shard_load_ms_median"], color="grey", ls="--", label="fixed cost of a shard load")
    axes[1].plot(mb, [p["compact_ms"] for p in points], marker=".", label="compaction (background)")
    axes[2].plot(mb, [p["commit_max_ms_during"] for p in points], marker=".", label="longest commit during compaction")
    axes[2].plot(mb, [p["commit_max_ms_without"] for p in points], marker=".", label="longest commit without")
    for ax, title in zip(axes, ("restart: store replay (ms)", "compaction time (ms)", "write pause (ms)"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("log size (MiB), half of it live")
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES_MB), help="log sizes in MiB")
    args = parser.parse_args()
    points = []
    for size in (float(s) for s in args.sizes.split(",")):
        point = measure_size(size)
        points.append(point)
        print(f"log {point['log_mb']:6.1f} MiB  replay {point['replay_ms']:8.1f} ms  compact {point['compact_ms']:8.1f} ms"
              f"  commit max {point['commit_max_ms_without']:6.1f} -> {point['commit_max_ms_during']:6.1f} ms"
              f"  after: {point['compacted_mb']:5.1f} MiB, replay {point['replay_after_compaction_ms']:7.1f} ms",
              flush=True)
    fixed = shard_fixed_cost()
    log_per_memory = points[-1]["compacted_mb"] * (1 << 20) / max(1, points[-1]["live_memories"])
    report = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "dim": DIM, "live_fraction": 0.5,
              "points": points, **fixed, "log_bytes_per_memory": log_per_memory}
    print(json.dumps({k: v for k, v in report.items() if k != "points"}, indent=1))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "thresholds.json").write_text(json.dumps(report, indent=1))
    plot(report, OUT / "thresholds.png")
    print(f"wrote {OUT / 'thresholds.json'} and thresholds.png")


if __name__ == "__main__":
    main()
