"""SciFact test at the server defaults with the cross-encoder reading a long memory's best passage (the default,
server/engine/passages.py) against its first tokens, side by side on one ingested tenant.

SciFact abstracts are long memories (most exceed ``PASSAGE_CHARS``), so the passage rule changes what the
cross-encoder reads for nearly every SciFact pair. This run checks that the rule, chosen on long chat turns, does
not cost the held-out SciFact test split. The alternative is the same process with the rerank stage's text
function swapped for :func:`server.text.memory_text` (what every memory read before the rule), alternating
variants so neither has the warmer caches; the pair-score cache is keyed by the pair's text, so each variant's
pairs are scored by the model.

    .venv/bin/python -m benchmarks.quality.scifact_passages [--rounds 1]

Writes ``benchmarks/results/quality/scifact_passages.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.quality.datasets import load_scifact, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.suites import FIXED_NOW_MS, _scores
from engram_proto.v1 import messages_pb2 as pb
from server.engine import search as search_module
from server.engine.passages import PASSAGE_CHARS
from server.text import memory_text

log = logging.getLogger(__name__)


def _cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                platform.processor())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality"
                        / "scifact_passages.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    test = load_scifact(split="test")
    long_docs = sum(len(d.text) > PASSAGE_CHARS for d in test.docs)
    items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id)) for d in test.docs]
    variants = {"best passage (default)": search_module.rerank_text,
                "first tokens": lambda _query, memory: memory_text(memory)}
    results: dict[str, list[dict]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp, EvalServer(Path(tmp)) as server:
        tenant = server.ingest("scifact", items)
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for name in order:
                search_module.rerank_text = variants[name]
                try:
                    t0 = time.perf_counter()
                    run = server.search(tenant, test.queries, DEFAULTS, now_ms=FIXED_NOW_MS, top_k=100)
                    seconds = time.perf_counter() - t0
                finally:
                    search_module.rerank_text = variants["best passage (default)"]
                scores = _scores(run, test.qrels, (10, 100))
                results[name].append({**scores, "seconds": round(seconds, 1)})
                log.info("%s round %d: %s", name, r, scores)
    out = {"date": time.strftime("%Y-%m-%d"), "machine": _cpu(), "cores": __import__("os").cpu_count(),
           "command": "python -m benchmarks.quality.scifact_passages --rounds %d" % args.rounds,
           "docs": len(test.docs), "docs_over_passage_chars": long_docs, "passage_chars": PASSAGE_CHARS,
           "queries": len(test.queries), "variants": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
