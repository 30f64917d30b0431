"""A request to the assistant is still about the user: "Can you suggest what I should cook for my friends?",
"Do you remember what I told you about the food I eat?", "你还记得我对什么过敏吗？" (server/engine/speakers.py
``REQUESTS``). The set (``benchmarks/quality/data/requests_*``, written for this project; 12 users, each two of
their own statements and two replies of an assistant that share the questions' words) asks three kinds of question
per user: ``request`` (a request that needs the user's statements), ``recall`` (asking to recall what the user said)
and ``assistant`` (what the assistant said: its "you" must keep the user rule off). One tenant, the users' turns
their scopes, so the other users' turns are distractors (benchmarks/quality/sessions.py).

    .venv/bin/python -m benchmarks.quality.requests [--out PATH]

Writes the set once to one in-process server at its defaults and searches it with each variant of ``VARIANTS``: the
rule off (``REQUESTS`` False: any "you" keeps the first-person rule off, as before), on, and the user's factor for a
request to act (``REQUEST_FACTOR``) at 1.5 (the named speaker's), 2, 3 and 5; top 10 and as the SDK's recall (the
context block): recall@1, @5, @10 and the block's evidence recall, by half (dev: odd users), kind and language, and
the held-out users written after the first measurement (rq13-rq24) apart.
Writes benchmarks/results/quality/requests.json.
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
from benchmarks.quality.sessions import NOW_MS, inputs, load_set

# name: (speakers.REQUESTS, speakers.REQUEST_FACTOR)
VARIANTS = {"any you: no user rule (before)": (False, 1.5), "requests as the user's, x1.5": (True, 1.5),
            "requests to act x2": (True, 2.0), "requests to act x3": (True, 3.0), "requests to act x5": (True, 5.0)}


def kinds(name: str = "requests") -> dict[str, str]:
    path = repo_root() / "benchmarks" / "quality" / "data" / f"{name}_queries.jsonl"
    with path.open(encoding="utf-8") as f:
        return {q["id"]: q["kind"] for q in map(json.loads, f) if q}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.ingest.run import cpu_model
    from server.engine import speakers

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path,
                        default=repo_root() / "benchmarks" / "results" / "quality" / "requests.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    data, kind = load_set("requests"), kinds()
    groups = {"all": list(data.qrels)}
    for half in ("dev", "held_out"):
        groups[half] = [q for q in data.qrels if data.half[q] == half]
    for k in sorted(set(kind.values())):
        for half in ("dev", "held_out"):
            groups[f"{k} {half}"] = [q for q in data.qrels if kind[q] == k and data.half[q] == half]
    for lang in ("en", "zh"):
        groups[lang] = [q for q in data.qrels if data.lang[q] == lang]
    for k in ("request", "recall"):   # the users written after the first measurement (rq13-rq24), never inspected
        groups[f"{k} held_out, second batch"] = [q for q in data.qrels if kind[q] == k and data.half[q] == "held_out"
                                                 and int(q[2:4]) > 12]
    results: dict = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": cpu_model(),
                     "command": "python -m benchmarks.quality.requests", "memories": len(data.memories),
                     "queries": len(data.queries), "variants": {}}
    saved = speakers.REQUESTS, speakers.REQUEST_FACTOR
    with tempfile.TemporaryDirectory(prefix="engram-requests-") as tmp, EvalServer(Path(tmp) / "data") as server:
        tenant = server.ingest("requests", inputs(data.memories))
        try:
            for name, (on, factor) in VARIANTS.items():
                speakers.REQUESTS, speakers.REQUEST_FACTOR = on, factor
                run = server.search(tenant, data.queries, DEFAULTS, now_ms=NOW_MS, top_k=10)
                block, _ = server.block_docs(tenant, data.queries, now_ms=NOW_MS)
                out = {}
                for group, ids in groups.items():
                    top = evaluate(run, data.qrels, ks=(1, 5, 10), query_ids=ids)
                    out[group] = {"recall@1": round(top["recall@1"], 4), "recall@5": round(top["recall@5"], 4),
                                  "recall@10": round(top["recall@10"], 4),
                                  "block_recall": round(block_recall(block, data.qrels, ids), 4), "queries": len(ids)}
                results["variants"][name] = out
                logging.info("%s: %s", name, {g: out[g] for g in ("dev", "held_out")})
        finally:
            speakers.REQUESTS, speakers.REQUEST_FACTOR = saved
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
