"""What the BM25 search beside it costs a query's embedding: one short query embedded over and over by the server's
embedder (loaded as the server loads it: bfloat16 where the CPU has it, one torch thread, traced, packed), alone, then
while another thread of the same process runs something else, round after round:

* ``bm25``: Lucene searches of a tenant of ~1 KB LoCoMo exchanges (the server's ``LuceneIndex``, as the search
  pipeline's CPU pool runs them beside the embedding);
* ``java_sleep``: a thread asleep in a Java call (``Thread.sleep``): whether a Java call holds Python's interpreter
  lock;
* ``numpy``: a NumPy matrix product on one BLAS thread: whether any busy second core slows it.

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.serving.embed_overlap [--rounds 2]

Writes ``benchmarks/results/serving/embed_overlap.json`` (ms a query embedding, per round and condition).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.ingest.run import command_line, cpu_model
from benchmarks.serving.run import RESULTS

QUERY = "What did Caroline research about adoption agencies?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--n", type=int, default=60, help="embeddings timed per condition and round")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks.serving.long_memories import conversation_texts
    from server import lexical
    from server.app import load_embedder, set_process_threads
    from server.config import load_config

    lexical.start(heap_mb=1024)
    import jnius
    import numpy as np
    from threadpoolctl import threadpool_limits

    from server.lexical.lucene import LuceneIndex

    set_process_threads(0, quiet=True)
    long, _, questions = conversation_texts()
    index = LuceneIndex.open(Path(tempfile.mkdtemp(prefix="engram-overlap-")) / "lexical")
    index.upsert([(i, text) for i, text in enumerate(long)])
    embedder = load_embedder(load_config(env={}), "cpu")
    embedder.warmup()
    texts = [getattr(embedder, "query_prefix", "") + QUERY]

    def embed_ms() -> float:
        embedder.forward(embedder.tokenize(texts))
        t0 = time.perf_counter()
        for _ in range(args.n):
            embedder.forward(embedder.tokenize(texts))
        return (time.perf_counter() - t0) * 1e3 / args.n

    def bm25(stop: threading.Event) -> None:
        i = 0
        while not stop.is_set():
            index.search_many([questions[i % len(questions)]], 100)
            i += 1

    def java_sleep(stop: threading.Event) -> None:
        sleep = jnius.autoclass("java.lang.Thread").sleep
        while not stop.is_set():
            sleep(5)

    def numpy_loop(stop: threading.Event) -> None:
        with threadpool_limits(1, user_api="blas"):
            a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
            while not stop.is_set():
                a @ a

    t0 = time.perf_counter()
    for q in questions[:50]:
        index.search_many([q], 100)
    bm25_alone = (time.perf_counter() - t0) * 1e3 / 50
    busy: dict[str, Callable[[threading.Event], None]] = {"bm25": bm25, "java_sleep": java_sleep, "numpy": numpy_loop}
    rounds: list[dict[str, float]] = []
    for _ in range(args.rounds):
        row = {"alone": embed_ms()}
        for name, work in busy.items():
            stop = threading.Event()
            thread = threading.Thread(target=work, args=(stop,), daemon=True)
            thread.start()
            time.sleep(0.3)
            row[name] = embed_ms()
            stop.set()
            thread.join()
        rounds.append({k: round(v, 2) for k, v in row.items()})
        print(json.dumps(rounds[-1]), flush=True)
    index.close()
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(), "cpus": os.cpu_count(),
        "command": command_line(), "query": QUERY, "bm25_alone_ms": round(bm25_alone, 2),
        "embedder": {k: v for k, v in embedder.describe().items() if k != "path"},   # no path of this machine
        "rounds": rounds,
        "median_ms": {k: round(statistics.median(r[k] for r in rounds), 2) for k in rounds[0]}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "embed_overlap.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(json.dumps(out["median_ms"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
