"""Two small sets written for this project (never copied from a public benchmark), English and Chinese:

* ``multisession``: per user, turns from different days where each question needs two or more of them ("What did
  the vet say about the dog I adopted?" needs the adoption and the vet visit, weeks apart);
* ``preference``: the user's stated likes and limits, asked indirectly ("Suggest a restaurant for my birthday
  dinner" must find "I am vegetarian" and "I prefer quiet places");
* ``requests``: a user and an assistant; requests to the assistant that need the user's statements ("Can you suggest
  what I should cook for my friends?"), asking it to recall them, and questions about its own replies
  (benchmarks/quality/requests.py compares the rule that reads them);
* ``order``: two events of a user's weeks or months, asked in which order they came ("Which did I do first, the
  pottery workshop or the cooking class?", "我是先学的吉他还是先学的钢琴？"); both are the evidence, beside older and
  newer turns that share the question's words (server/engine/time_intent.py reads such a question as no time intent).

    .venv/bin/python -m benchmarks.quality.run --only multisession,preference,requests,order

Each set is one tenant (every user's turns, their scope the user, so the other users' turns are the distractors),
written oldest first through Write with ``created_at`` from each turn's age; each question is searched "as of" the
set's now: recall@5 and recall@10 of a top-10 search, and the context block's evidence recall as the SDK's ``recall``
gets it (benchmarks/quality/block.py), by half (dev: odd user numbers; held out: even) and language.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.quality.block import block_recall
from benchmarks.quality.datasets import Query, evaluate, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from engram_proto.v1 import messages_pb2 as pb
from server.config import DAY_S

SETS = ("multisession", "preference", "requests", "order")
NOW_MS = 1_767_225_600_000   # 2026-01-01 UTC, the other written sets' now


@dataclass(frozen=True)
class SessionSet:
    memories: tuple[dict, ...]
    queries: tuple[Query, ...]
    qrels: dict[str, dict[str, int]]
    lang: dict[str, str]
    half: dict[str, str]


def load_set(name: str, root: Path | None = None) -> SessionSet:
    base = (root or repo_root()) / "benchmarks" / "quality" / "data"

    def read(part: str) -> list[dict]:
        with (base / f"{name}_{part}.jsonl").open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    memories, raw = read("memories"), read("queries")
    return SessionSet(memories=tuple(memories), queries=tuple(Query(id=q["id"], text=q["text"]) for q in raw),
                      qrels={q["id"]: {r: 1 for r in q["relevant"]} for q in raw},
                      lang={q["id"]: q["lang"] for q in raw}, half={q["id"]: q["half"] for q in raw})


def inputs(memories: Sequence[dict]) -> list[tuple[str, pb.MemoryInput]]:
    ordered = sorted(memories, key=lambda m: (-m["age_days"], m["id"]))
    return [(m["id"], pb.MemoryInput(content=m["content"], type=pb.MEMORY_TYPE_EPISODIC, scope=m["user"],
                                     source_ref=m["id"], created_at_ms=int(NOW_MS - m["age_days"] * DAY_S * 1000)))
            for m in ordered]


def question_groups(data: SessionSet) -> dict[str, list[str]]:
    """The question ids reported apart: all, each half (dev, held_out) and each language (en, zh)."""
    groups = {"all": list(data.qrels)}
    for half in ("dev", "held_out"):
        groups[half] = [q for q in data.qrels if data.half[q] == half]
    for lang in ("en", "zh"):
        groups[lang] = [q for q in data.qrels if data.lang[q] == lang]
    return groups


def run_set(server: EvalServer, name: str) -> dict:
    data = load_set(name)
    tenant = server.ingest(name, inputs(data.memories))
    run = server.search(tenant, data.queries, DEFAULTS, now_ms=NOW_MS, top_k=10)
    block, ms = server.block_docs(tenant, data.queries, now_ms=NOW_MS)
    groups = question_groups(data)
    out: dict = {"memories": len(data.memories), "queries": len(data.queries),
                 "p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1)}
    for group, ids in groups.items():
        top = evaluate(run, data.qrels, ks=(5, 10), query_ids=ids)
        out[group] = {"recall@10": round(top["recall@10"], 4), "recall@5": round(top["recall@5"], 4),
                      "block_recall": round(block_recall(block, data.qrels, ids), 4), "queries": len(ids)}
    return out


def sessions_table(results: dict) -> str:
    """One row per written set and group: recall@10, recall@5, block evidence recall (and the set's p50 / p95 ms)."""
    lines = ["| set | queries | R@10 | R@5 | block | p50 / p95 ms |", "|---|---|---|---|---|---|"]
    for name in SETS:
        data = results.get(name)
        if not data or "skipped" in data:
            continue
        for group in ("all", "dev", "held_out", "en", "zh"):
            r = data[group]
            lines.append(f"| {name} {group.replace('_', '-')} | {r['queries']} | {r['recall@10']:.3f} | "
                         f"{r['recall@5']:.3f} | {r['block_recall']:.3f} | {data['p50_ms']:.0f} / {data['p95_ms']:.0f} |")
    return "\n".join(lines) + "\n"
