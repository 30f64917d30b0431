"""Each first-stage retriever alone on LoCoMo, with the parameters of what it indexes and how it scores varied: the
evidence recall@k of BM25 for a grid of its k1 and b, and of the dense retriever for the texts a turn is embedded as
and the embedder's prefixes. No fusion, no rerank, no ranking stage: what the cross-encoder's window (the fused top
20) and the fusion can only draw from.

    .venv/bin/python -m benchmarks.quality.first_stage bm25 [--long]   # k1 x b, the server's Lucene and analysis
    .venv/bin/python -m benchmarks.quality.first_stage dense           # indexed text forms and prefixes

``bm25``: each conversation's turns written as the server indexes an EPISODIC memory (``server.text.indexed_text``:
the date header, ``"<speaker>: <text>"``), one real :class:`server.lexical.LuceneIndex` a conversation (its
analysers, its windows of a long memory, its folding), each question searched with ``BM25Similarity(k1, b)`` set on
the searcher (Lucene's norms do not depend on k1 and b). ``--long``: the long-turn suite's memories instead
(benchmarks/quality/long_turns.py: every evidence turn and a third of the others inside ~1 KB of filler). The
server's own are k1 0.9, b 0.4 (Anserini's defaults, ``LuceneIndex.open``).

``dense``: the server's embedder; each turn embedded as the server embeds it (the date header, the content, the
previous turn of its session as its context) and as three other forms (no date; no context; neither), then the
server's form with the query and passage prefixes swapped for the model's symmetric one (``"query: "`` on both
sides) or ``"passage: "`` on both.

Recall@5/10/20/50 by split (dev: ``block.LOCOMO_DEV``, which chooses; held out: reported) and recall@10 by category.
Writes benchmarks/results/quality/first_stage_bm25[_long].json or first_stage_dense.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import Conversation, LocomoQuestion, load_locomo, repo_root

K1 = (0.6, 0.9, 1.2, 1.6, 2.0)
B = (0.2, 0.4, 0.6, 0.75, 0.9)
KS = (5, 10, 20, 50)
LONG_FILLER = (500, 100, 400)   # the long-turn suite's ~1 KB turns (--filler 500,100,400)


def split_of(conv: Conversation) -> str:
    return "dev" if conv.id in LOCOMO_DEV else "held_out"


class Recall:
    """Evidence recall@k of ranked turn ids, kept by (variant, split, group) and averaged per question."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str, str, int], list[float]] = defaultdict(list)

    def add(self, variant: str, split: str, q: LocomoQuestion, ranked: Sequence[str]) -> None:
        evidence = set(q.evidence)
        for k in KS:
            found = len(set(ranked[:k]) & evidence) / len(evidence)
            self.values[(variant, split, "all", k)].append(found)
            self.values[(variant, split, f"cat{q.category}", k)].append(found)

    def table(self, variants: Sequence[str]) -> dict:
        out: dict = {}
        for v in variants:
            out[v] = {}
            for split in ("dev", "held_out"):
                if not self.values[(v, split, "all", KS[0])]:
                    continue
                row = {f"recall@{k}": round(float(np.mean(self.values[(v, split, "all", k)])), 4) for k in KS}
                row["recall@10 by category"] = {c: round(float(np.mean(self.values[(v, split, f"cat{c}", 10)])), 4)
                                                for c in (1, 2, 3, 4) if self.values[(v, split, f"cat{c}", 10)]}
                row["questions"] = len(self.values[(v, split, "all", 10)])
                out[v][split] = row
        return out


def memories(conv: Conversation, long: bool) -> list[tuple[str, str, int]]:
    """(turn id, content, created_at ms) of each turn as the block suite (or with ``long``, the long-turn suite)
    writes it."""
    if not long:
        return [(t.id, f"{t.speaker}: {t.text}", t.created_at * 1000) for t in conv.turns]
    from benchmarks.quality import long_turns

    evidence = {e for q in conv.questions for e in q.evidence}
    return [(turn_id, m.content, m.created_at_ms)
            for turn_id, m in long_turns.inputs(conv, random.Random(0), evidence, LONG_FILLER)]


def bm25_grid(conversations: Sequence[Conversation], *, long: bool) -> dict:
    from server import lexical
    from server.lexical.jvm import jclass
    from server.lexical.lucene import LuceneIndex
    from server.text import indexed_text

    lexical.start()
    similarity = jclass("org.apache.lucene.search.similarities.BM25Similarity")
    recall = Recall()
    names = [f"k1 {k1} b {b}" for k1 in K1 for b in B]
    with tempfile.TemporaryDirectory(prefix="engram-bm25-grid-") as tmp:
        indexes = []
        for conv in conversations:
            index = LuceneIndex.open(Path(tmp) / conv.id)
            rows = memories(conv, long)
            index.upsert([(n + 1, indexed_text(content, dated=True, created_at_ms=ms))
                          for n, (_, content, ms) in enumerate(rows)])
            indexes.append((conv, index, {n + 1: turn_id for n, (turn_id, _, _) in enumerate(rows)}))
        try:
            for k1 in K1:
                for b in B:
                    for conv, index, turn_of in indexes:
                        index._similarity = similarity(float(k1), float(b))
                        found = index.search_many([q.text for q in conv.questions], max(KS))
                        for q, (_, ids) in zip(conv.questions, found, strict=True):
                            recall.add(f"k1 {k1} b {b}", split_of(conv), q, [turn_of[int(i)] for i in ids])
        finally:
            for _, index, _ in indexes:
                index.close()
    return recall.table(names)


def dense_forms(conversations: Sequence[Conversation]) -> dict:
    from server.app import load_embedder
    from server.config import load_config
    from server.text import indexed_text

    emb = load_embedder(load_config(env={}), "cpu")
    qp, pp = getattr(emb, "query_prefix", ""), getattr(emb, "passage_prefix", "")
    # name: (query prefix, passage prefix, text form)
    variants = {"served: date, content, context": (qp, pp, "served"), "no date": (qp, pp, "undated"),
                "no context": (qp, pp, "uncontexted"), "content alone": (qp, pp, "content"),
                "served, the query prefix on both sides": (qp, qp, "served"),
                "served, the passage prefix on both sides": (pp, pp, "served")}
    recall = Recall()
    for conv in conversations:
        forms: Mapping[str, list[str]] = defaultdict(list)
        previous: dict[str, str] = {}
        for i, t in enumerate(conv.turns):
            said, ms = f"{t.speaker}: {t.text}", t.created_at * 1000
            context = previous.get(t.session, "") if i and conv.turns[i - 1].session == t.session else ""
            forms["served"].append(indexed_text(said, dated=True, created_at_ms=ms, context=context))
            forms["undated"].append(indexed_text(said, dated=False, created_at_ms=ms, context=context))
            forms["uncontexted"].append(indexed_text(said, dated=True, created_at_ms=ms))
            forms["content"].append(said)
            previous[t.session] = said
        ids = [t.id for t in conv.turns]
        for name, (q_prefix, p_prefix, form) in variants.items():
            queries = emb.embed([q_prefix + q.text for q in conv.questions])
            turns = emb.embed([p_prefix + text for text in forms[form]])
            scores = turns @ queries.T
            for j, q in enumerate(conv.questions):
                recall.add(name, split_of(conv), q, [ids[i] for i in np.argsort(-scores[:, j], kind="stable")])
    return recall.table(list(variants))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.ingest.run import cpu_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("bm25", "dense"))
    parser.add_argument("--long", action="store_true", help="bm25: the long-turn suite's memories")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    conversations = load_locomo()
    name = "first_stage_dense" if args.what == "dense" else f"first_stage_bm25{'_long' if args.long else ''}"
    out = args.out or repo_root() / "benchmarks" / "results" / "quality" / f"{name}.json"
    started = dt.datetime.now(dt.UTC)
    table = dense_forms(conversations) if args.what == "dense" else bm25_grid(conversations, long=args.long)
    result = {"date": started.isoformat(timespec="seconds"), "machine": cpu_model(),
              "command": "python -m benchmarks.quality.first_stage " + " ".join(sys.argv[1:] if argv is None else argv),
              "dev_conversations": list(LOCOMO_DEV), "variants": table}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for variant, splits in table.items():
        print(variant, *(f"{s} R@10 {splits[s]['recall@10']:.3f} R@20 {splits[s]['recall@20']:.3f}" for s in splits))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
