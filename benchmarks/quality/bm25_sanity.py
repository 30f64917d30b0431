"""BM25 sanity check: SciFact nDCG@10 of ``server.lexical.LuceneIndex``.

Anserini's flat BM25 baseline (k1=0.9, b=0.4, title + " " + text) scores 0.679;
ours must be >= 0.66. Also reports index build time and per-query search latency.

    .venv/bin/python -m benchmarks.quality.bm25_sanity [--data DIR] [--out results.json]

It measures the lexical index alone (no server); ``make bench-quality`` measures the same BM25
through the server, with every other stage beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quality.datasets import default_data_dir, load_scifact, ndcg_at_k
from server import lexical
from server.lexical.lucene import LuceneIndex

_log = logging.getLogger(__name__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="the folder holding scifact/")
    parser.add_argument("--batch", type=int, default=500, help="docs per upsert call")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    scifact = load_scifact(args.data, split="test")
    corpus = [(int(d.id), d.text) for d in scifact.docs]
    queries = {q.id: q.text for q in scifact.queries}
    qrels = scifact.qrels
    lexical.start(heap_mb=1024)
    with tempfile.TemporaryDirectory() as tmp:
        index = LuceneIndex.open(Path(tmp) / "scifact")
        try:
            t0 = time.perf_counter()
            for i in range(0, len(corpus), args.batch):
                index.upsert(corpus[i : i + args.batch])
            build_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            index.commit(len(corpus))
            commit_s = time.perf_counter() - t0

            qids = [q for q in queries if q in qrels]
            for _ in range(2):  # warm up the JVM's JIT
                index.search_many([queries[q] for q in qids], 10)
            latencies_ms = []
            scores = []
            for qid in qids:
                t0 = time.perf_counter()
                _, ids = index.search(queries[qid], 10)
                latencies_ms.append((time.perf_counter() - t0) * 1e3)
                scores.append(ndcg_at_k([str(i) for i in ids.tolist()], qrels[qid], 10))
            t0 = time.perf_counter()
            index.search_many([queries[q] for q in qids], 100)
            k100_ms = (time.perf_counter() - t0) * 1e3 / len(qids)
            result = {
                "dataset": "scifact-test",
                "docs": index.count(),
                "queries": len(qids),
                "ndcg@10": round(float(np.mean(scores)), 4),
                "anserini_flat_bm25": 0.679,
                "build_s": round(build_s, 2),
                "commit_s": round(commit_s, 2),
                "search_ms_p50": round(float(np.percentile(latencies_ms, 50)), 3),
                "search_ms_p99": round(float(np.percentile(latencies_ms, 99)), 3),
                "search_ms_mean": round(float(np.mean(latencies_ms)), 3),
                "search_many_k100_ms_per_query": round(k100_ms, 3),
                "disk_bytes": index.disk_bytes(),
            }
        finally:
            index.close()
    text = json.dumps(result, indent=2)
    _log.info("result\n%s", text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
