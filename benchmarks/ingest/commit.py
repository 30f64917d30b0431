"""A Write's commit over real vectors, in process, as the tenant grows: what the write path costs after the forward
pass once the embedder is fast (a GPU), with the near-duplicate lookups against a flat tenant of growing size.

Texts: ``benchmarks.ingest.texts`` (LoCoMo-sized turns, or ~1 KB ones), embedded once by the server's default
embedder as the server loads it. Then for each variant, a fresh tenant shard (the real store and its log with
fsync, the FAISS tiers, Lucene, audit) takes the texts in Writes of ``--batch`` through ``commit_writes`` at the
default e5 thresholds, and the time of each Write is recorded with the tenant's size. What the Write handler does
around the commit (salience, the fingerprint, the answer) is ``benchmarks.ingest.stages``'.

Variants, side by side in one run:

* ``gemm``: the flat tier as the server runs it (``FlatDenseIndex.search``: a Write's lookups as one GEMM and a
  top-k per row, from ``GEMM_FROM_QUERIES`` queries on);
* ``faiss``: the same index searched by FAISS's own flat scan (``IndexIDMap2.search``) at any query count.

``--scan-only``: no embedder and no tenant; the flat search's milliseconds, FAISS's scan against the GEMM, by
tenant size and query count (where ``GEMM_FROM_QUERIES`` comes from), and the update linker's full analysis of a
new text against its gate (``updates.may_update``).

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.ingest.commit --n 20480
    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.ingest.commit --scan-only --name flat_scan
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ingest.run import RESULTS, cpu_model
from benchmarks.ingest.texts import long_turns, short_turns

T0_MS = 1_767_225_600_000   # 2026-01-01 UTC: the first Write's clock, a second later per memory


def embed(texts: list[str]) -> np.ndarray:
    from server.app import load_embedder
    from server.config import load_config

    model = load_embedder(load_config(env={}), "cpu")
    rows = [model.embed(texts[i:i + 64]) for i in range(0, len(texts), 64)]
    return np.vstack(rows).astype(np.float32)


def faiss_flat(dim: int) -> Any:
    """The flat tier searched by FAISS's own scan at any query count (the variant the GEMM replaced)."""
    from server.index.dense import FlatDenseIndex

    class FaissScanFlat(FlatDenseIndex):
        def _search_held(self, q: np.ndarray, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
            return self._index.search(q, k)

    return FaissScanFlat(dim)


def run_variant(name: str, texts: list[str], vectors: np.ndarray, *, batch: int) -> dict[str, Any]:
    from server.config import MemoryConfig
    from server.domain import MemoryInput, MemoryType
    from server.engine.write import commit_writes
    from server.index.dense import FlatDenseIndex
    from server.index.tiered import TieredDenseIndex
    from server.index.tiers import TierRules
    from server.lexical.lucene import LuceneIndex
    from server.store.audit import AuditPolicy
    from server.store.memory_store import TenantStore
    from server.tenants.shard import TenantShard

    dim = vectors.shape[1]
    cfg = MemoryConfig(dedupe_cosine=0.985, update_link_cosine=0.86)   # e5's own thresholds (the defaults)
    with tempfile.TemporaryDirectory(prefix=f"engram-commit-{name}-") as tmp:
        directory = Path(tmp) / "t"
        directory.mkdir()
        store, _ = TenantStore.open(directory, dim=dim)
        dense = TieredDenseIndex(dim, rules=TierRules(), exact_source=store.exact_vectors,
                                 flat_factory=faiss_flat if name == "faiss" else FlatDenseIndex)
        shard = TenantShard("t", directory, store, dense, LuceneIndex.open(directory / "lucene"),
                            audit=AuditPolicy().open(directory))
        writes: list[tuple[int, float]] = []
        created = merged = linked = 0
        t0 = time.perf_counter()
        for at in range(0, len(texts), batch):
            inputs = [MemoryInput(content=t, type=MemoryType.EPISODIC) for t in texts[at:at + batch]]
            started = time.perf_counter()
            with shard.write_lock:
                results = commit_writes(shard, inputs, vectors[at:at + batch], cfg=cfg, now_ms=T0_MS + at * 1000)
            writes.append((len(shard.store), time.perf_counter() - started))
            merged += sum(bool(r.merged_into) for r in results)
            linked += sum(bool(r.updates) for r in results)
            created += len(results)
        seconds = time.perf_counter() - t0
        shard.close()
    return {"memories": created, "merged": merged, "linked_as_update": linked, "seconds": round(seconds, 2),
            "rate": round(created / seconds, 1), "us_per_memory": round(1e6 * seconds / created, 1),
            "writes": [(n, round(1000 * s, 2)) for n, s in writes]}


def scan_table(sizes: tuple[int, ...] = (4096, 20000, 50000), queries: tuple[int, ...] = (1, 2, 4, 8, 16, 128),
               dim: int = 384, repeat: int = 5) -> list[dict[str, Any]]:
    """Milliseconds of one flat search of ``k`` = 8 over random unit vectors, FAISS's scan against the GEMM, one
    thread each (the server's share on two cores)."""
    import faiss
    from threadpoolctl import threadpool_limits

    from server.index.dense import top_k

    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(0)
    rows = []
    with threadpool_limits(1, user_api="blas"):
        for n in sizes:
            vectors = rng.normal(size=(n, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            scan = faiss_flat(dim)
            scan.add(np.arange(n), vectors)
            for nq in queries:
                q = vectors[:nq].copy()
                row: dict[str, Any] = {"vectors": n, "queries": nq}
                for name, search in (("faiss_ms", lambda: scan.search(q, 8)), ("gemm_ms", lambda: top_k(q, vectors, 8))):
                    search()
                    t0 = time.perf_counter()
                    for _ in range(repeat):
                        search()
                    row[name] = round(1000 * (time.perf_counter() - t0) / repeat, 2)
                rows.append(row)
                print(row, flush=True)
    return rows


def linker_table() -> list[dict[str, Any]]:
    """µs per new text of the update linker's full analysis against its gate (``updates.may_update``), uncached, on
    4,000 short and 1,000 ~1 KB turns; and the share the gate lets through."""
    from server.engine import updates

    rows = []
    for kind, texts in (("short", short_turns(4000)), ("long", long_turns(1000))):
        row: dict[str, Any] = {"kind": kind, "texts": len(texts)}
        for name, fn in (("analysis_us", updates._analysed.__wrapped__), ("gate_us", updates.may_update.__wrapped__)):
            t0 = time.perf_counter()
            for text in texts:
                fn(text)
            row[name] = round(1e6 * (time.perf_counter() - t0) / len(texts), 1)
        row["gate_passes"] = round(sum(map(updates.may_update.__wrapped__, texts)) / len(texts), 3)
        rows.append(row)
        print(row, flush=True)
    return rows


def by_size(writes: list[tuple[int, float]], batch: int, edges: list[int]) -> dict[str, float]:
    """Microseconds per memory of the Writes that ended with the tenant in each size bucket."""
    out: dict[str, float] = {}
    for low, high in zip([0, *edges], [*edges, 1 << 62], strict=False):
        ms = [s for n, s in writes if low < n <= high]
        if ms:
            out[f"{low}-{high if high < 1 << 62 else ''}"] = round(1000 * float(np.median(ms)) / batch, 1)
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, variant in result["variants"].items():
        n, ms = zip(*variant["writes"], strict=True)
        ax.plot(n, [1000 * m / result["batch"] for m in ms], label=f"{name} ({variant['rate']:.0f} memories/s)",
                lw=1)
    ax.set_xlabel("memories in the tenant")
    ax.set_ylabel("commit, µs per memory")
    ax.set_title(f"A Write of {result['batch']}'s commit, {result['kind']} turns, e5 vectors ({result['machine']})",
                 fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", choices=("short", "long"), default="short")
    p.add_argument("--n", type=int, default=20480)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--variants", default="gemm,faiss")
    p.add_argument("--scan-only", action="store_true", help="only the flat search's and the linker gate's tables (no embedder, no Lucene)")
    p.add_argument("--name", default="commit")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.scan_only:
        out = {"machine": cpu_model(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "command": " ".join(["python", "-m", "benchmarks.ingest.commit", *(argv or sys.argv[1:])]),
               "scan": scan_table(), "linker": linker_table()}
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.name}.json").write_text(json.dumps(out, indent=1) + "\n")
        return 0
    from server import lexical

    lexical.start()
    texts = short_turns(args.n) if args.kind == "short" else long_turns(args.n)
    t0 = time.perf_counter()
    vectors = embed(texts)
    embed_s = time.perf_counter() - t0
    edges = [n for n in (2048, 5000, 10000, 15000, 20000) if n < args.n]
    result: dict[str, Any] = {
        "kind": args.kind, "n": args.n, "batch": args.batch, "machine": cpu_model(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(["python", "-m",
                                                                                      "benchmarks.ingest.commit",
                                                                                      *(argv or sys.argv[1:])]),
        "embedding_seconds": round(embed_s, 1), "variants": {}}
    warm = min(len(texts), 4 * args.batch)   # the JVM's JIT and the caches warm on a throwaway tenant first
    run_variant("gemm", texts[:warm], vectors[:warm], batch=args.batch)
    for name in args.variants.split(","):
        variant = run_variant(name, texts, vectors, batch=args.batch)
        variant["us_per_memory_by_tenant_size"] = by_size(variant["writes"], args.batch, edges)
        result["variants"][name] = variant
        print(name, {k: v for k, v in variant.items() if k != "writes"}, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out / f"{args.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
