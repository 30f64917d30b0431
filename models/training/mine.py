"""Hybrid candidate lists from the real server: what the reranker will see at serving time.

One in-process engram server (packaged embedder, FAISS, Lucene; no reranker) ingests the SciFact
corpus once; the SciFact train claims, the self-supervised sentence queries and — for evaluation
only, written to a separate file that training never reads — the SciFact test claims run through the
hybrid Search. Deterministic: flat FAISS, Lucene BM25 and RRF with a fixed tie-break.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from benchmarks.quality.datasets import Query, load_scifact
from models.training.data import MinedQuery, sentence_queries

log = logging.getLogger(__name__)

NOW_MS = 1_767_225_600_000  # 2026-01-01: searches "as of" a fixed time record no accesses
TRAIN_FILE = "scifact_train.json"
SELFSUP_FILE = "scifact_selfsup.json"
TEST_FILE = "scifact_test_eval_only.json"


def save(path: Path, mined: Sequence[MinedQuery]) -> None:
    path.write_text(json.dumps([asdict(m) for m in mined], ensure_ascii=False), encoding="utf-8")


def load(path: Path) -> list[MinedQuery]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [MinedQuery(id=m["id"], text=m["text"], positives=tuple(m["positives"]),
                       candidates=tuple(m["candidates"]), positive_text=m.get("positive_text")) for m in raw]


def mine(out_dir: Path, *, selfsup: int, seed: int, depth: int = 50) -> None:
    """Writes the three candidate files under ``out_dir`` (skipped when all exist)."""
    from benchmarks.quality.harness import HYBRID, EvalServer

    paths = [out_dir / f for f in (TRAIN_FILE, SELFSUP_FILE, TEST_FILE)]
    if all(p.is_file() for p in paths):
        log.info("candidates cached in %s", out_dir)
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = load_scifact(split="train"), load_scifact(split="test")
    docs = {d.id: d.text for d in train.docs}
    sentences = sentence_queries(docs, count=selfsup, seed=seed)
    from server.grpc.gen.engram.v1 import messages_pb2 as pb

    with tempfile.TemporaryDirectory(prefix="engram-mine-") as tmp, \
            EvalServer(Path(tmp), reranker="", overrides={"models": {"reranker": ""}}) as server:
        items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id))
                 for d in train.docs]
        tenant = server.ingest("scifact", items)

        def run(queries: Sequence[Query]) -> dict[str, list[str]]:
            return server.search(tenant, queries, HYBRID, now_ms=NOW_MS, top_k=depth)

        runs = run(train.queries)
        save(paths[0], [MinedQuery(id=q.id, text=q.text, positives=tuple(d for d, g in train.qrels[q.id].items() if g > 0),
                                   candidates=tuple(runs[q.id])) for q in train.queries])
        sq = [Query(id=f"ss-{doc_id}", text=s) for doc_id, s, _ in sentences]
        runs = run(sq)
        save(paths[1], [MinedQuery(id=q.id, text=q.text, positives=(doc_id,), candidates=tuple(runs[q.id]),
                                   positive_text=rest) for q, (doc_id, _, rest) in zip(sq, sentences, strict=True)])
        runs = run(test.queries)
        save(paths[2], [MinedQuery(id=q.id, text=q.text, positives=tuple(d for d, g in test.qrels[q.id].items() if g > 0),
                                   candidates=tuple(runs[q.id])) for q in test.queries])
    log.info("mined %d train, %d self-supervised, %d test queries into %s",
             len(train.queries), len(sentences), len(test.queries), out_dir)
