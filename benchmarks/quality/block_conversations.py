"""The LoCoMo block suite conversation by conversation, with a given cross-encoder: what a stage trained on some dev
conversations' questions does on the dev conversation it never saw (training/qa_stage.py ``--conversations``).

    .venv/bin/python -m benchmarks.quality.block_conversations [--reranker PATH] [--calibration PATH] \
        [--conversations conv-41] --out PATH

One in-process server at its defaults (``--reranker``: another cross-encoder folder; none: the bundled one;
``--calibration``: another relevance calibration, benchmarks.quality.calibrate; ``--conversations``: only those), the
background consolidation as the environment sets it (``ENGRAM_ADVANCED__CONSOLIDATE_INTERVAL_S=0`` as the block
suite's comparisons run), each conversation written as the block suite writes it and every question searched once for
the top 10 and once as the SDK's ``recall`` gets the context block, caches off. Per conversation and category:
questions, recall@10, recall@5 and the block's evidence recall.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import tempfile
from pathlib import Path

from benchmarks.quality.block import LOCOMO_DEV, block_recall
from benchmarks.quality.datasets import LOCOMO_CATEGORIES, Query, evaluate, load_locomo
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.suites import locomo_inputs


def main(argv: list[str] | None = None) -> int:
    from benchmarks.ingest.run import cpu_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reranker", default="", help="a cross-encoder folder (default: the bundled one)")
    parser.add_argument("--calibration", default="", help="a calibration JSON (default: the bundled one)")
    parser.add_argument("--conversations", default="", help="comma-separated conversation ids (default: all five)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    only = {c for c in args.conversations.split(",") if c}
    overrides = {"advanced": {"calibration": args.calibration}} if args.calibration else None
    logging.basicConfig(level=logging.WARNING)
    result: dict = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": cpu_model(),
                    "reranker": args.reranker or "bundled", "calibration": args.calibration or "bundled",
                    "dev_conversations": list(LOCOMO_DEV),
                    "conversations": {}}
    with tempfile.TemporaryDirectory(prefix="engram-block-conv-") as tmp, \
            EvalServer(Path(tmp) / "data", reranker=args.reranker, overrides=overrides) as server, server.caches_off():
        for conv in load_locomo():
            if only and conv.id not in only:
                continue
            tenant = server.ingest(f"block-{conv.id}", locomo_inputs(conv, "speaker"))
            queries = [Query(id=q.id, text=q.text) for q in conv.questions]
            qrels = {q.id: {d: 1 for d in q.evidence} for q in conv.questions}
            category = {q.id: q.category for q in conv.questions}
            run = server.search(tenant, queries, DEFAULTS, now_ms=conv.now * 1000, top_k=10)
            block, _ = server.block_docs(tenant, queries, now_ms=conv.now * 1000)
            rows = {}
            for group in ("all", *LOCOMO_CATEGORIES):
                ids = [q for q in qrels if group == "all" or category[q] == group]
                if not ids:
                    continue
                top = evaluate(run, qrels, ks=(5, 10), query_ids=ids)
                rows[str(group)] = {"questions": len(ids), "recall@10": round(top["recall@10"], 4),
                                    "recall@5": round(top["recall@5"], 4),
                                    "block_recall": round(block_recall(block, qrels, ids), 4)}
            result["conversations"][conv.id] = rows
            print(conv.id, rows["all"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
