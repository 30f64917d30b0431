"""A question about the order of two events ("Which did I do first, the pottery workshop or the cooking class?",
"Did I go to Kyoto or Lisbon first?", "我是先学的吉他还是先学的钢琴？") needs both events in front of the model; read
as a question about the first state (FIRST: older memories lifted, no recency) or the latest (CURRENT, "from earliest
to latest"), it ranks by age memories the question does not ask about. ``time_intent.ORDER_QUESTIONS`` reads such a
question as no time intent. The set (``benchmarks/quality/data/order_*``, written for this project; 12 users, 8
English and 4 Chinese, each two events and four turns that share the questions' words, older and newer than the
events) asks two questions per user; both events are the evidence. One tenant, the users' turns their scopes, so the
other users' turns are distractors (benchmarks/quality/sessions.py).

    .venv/bin/python -m benchmarks.quality.order [--out PATH]

Writes the set once to one in-process server at its defaults and searches it with the rule off (the cue words alone,
as before) and on: recall@2 (both events first), @5 and @10 of a top-10 search, and the context block's evidence
recall as the SDK's recall gets it, by half (dev: odd users) and language, with each question's intent under each.
Writes benchmarks/results/quality/order.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import tempfile
from pathlib import Path

from benchmarks.quality.block import block_recall
from benchmarks.quality.datasets import evaluate, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.sessions import NOW_MS, inputs, load_set, question_groups

VARIANTS = {"cue words alone (before)": False, "order questions: no intent": True}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.ingest.run import cpu_model
    from server.engine import time_intent

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality" / "order.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    data = load_set("order")
    groups = question_groups(data)
    results: dict = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": cpu_model(),
                     "command": "python -m benchmarks.quality.order", "memories": len(data.memories),
                     "queries": len(data.queries), "variants": {}}
    saved = time_intent.ORDER_QUESTIONS
    with tempfile.TemporaryDirectory(prefix="engram-order-") as tmp, EvalServer(Path(tmp) / "data") as server:
        tenant = server.ingest("order", inputs(data.memories))
        try:
            for name, on in VARIANTS.items():
                time_intent.ORDER_QUESTIONS = on
                run = server.search(tenant, data.queries, DEFAULTS, now_ms=NOW_MS, top_k=10)
                block, _ = server.block_docs(tenant, data.queries, now_ms=NOW_MS)
                out: dict = {"intents": {q.id: time_intent.detect(q.text).name for q in data.queries}}
                for group, ids in groups.items():
                    top = evaluate(run, data.qrels, ks=(2, 5, 10), query_ids=ids)
                    out[group] = {"recall@2": round(top["recall@2"], 4), "recall@5": round(top["recall@5"], 4),
                                  "recall@10": round(top["recall@10"], 4),
                                  "block_recall": round(block_recall(block, data.qrels, ids), 4), "queries": len(ids)}
                out["per_question"] = {q: {"top": run[q][:5], "block": block[q]} for q in data.qrels}
                results["variants"][name] = out
                logging.info("%s: %s", name, {g: out[g] for g in ("dev", "held_out")})
        finally:
            time_intent.ORDER_QUESTIONS = saved
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
