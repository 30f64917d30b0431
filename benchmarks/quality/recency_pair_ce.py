"""Offline: newest-first's groups with the cross-encoder reading two statements as evidence of one attribute.

    .venv/bin/python -m benchmarks.quality.recency_rules dump --sets recency,recency_dev2,recency_dev3,zh,updates,...
    .venv/bin/python -m benchmarks.quality.recency_pair_ce [--held-out]

Over the dumped pass (``recency_rules.DUMP``): for every two statements of the same subject among a query's top 5
(``siblings.joinable``; English only: the cross-encoder does not read Chinese, ``search.rerank_cjk``), the bundled
cross-encoder scores the older text as the query and the newer as the passage. A variant of
``siblings.newest_first`` groups two statements when the query's words do (the rule as it is) or when that logit is
at least a threshold; each threshold's figures beside the rule's. The held-out recency sets are printed only with
``--held-out`` (choose on the dev sets first). Not a server feature: it measures whether a model's reading of two
statements carries what word rules do not (docs/concepts/updates.md).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import pickle

from benchmarks.quality import recency_rules as rr
from server.engine import siblings
from server.text import has_cjk

THRESHOLDS = (0.0, 2.0, 4.0, 6.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--held-out", action="store_true", help="also the held-out recency sets (after choosing)")
    parser.add_argument("--reranker", default="models/weights/engram-reranker-v1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from models.reranker import HFCrossEncoder

    with rr.DUMP.open("rb") as f:
        data = pickle.load(f)
    pairs: set[tuple[str, str]] = set()
    for name, s in data.items():
        if "held" in name and not args.held_out:
            continue
        for r in s["runs"].values():
            ms = [m for m in r["memories"][:siblings.SLOTS] if m is not None and siblings.joinable(m)]
            for a, b in itertools.permutations(ms, 2):
                if siblings._subject(a) == siblings._subject(b) and not (has_cjk(a.content) or has_cjk(b.content)):
                    pairs.add((a.content, b.content))
    ordered = sorted(pairs)
    model = HFCrossEncoder.load(args.reranker, max_length=0, num_threads=1)
    scores = dict(zip(ordered, model.score(ordered).tolist(), strict=True)) if ordered else {}
    print(f"{len(ordered)} statement pairs scored")
    rule = siblings.same_attribute

    def variant(threshold: float):  # type: ignore[no-untyped-def]
        def same(a, b, words_a, words_b, *, cosine=None, min_cosine=None):  # type: ignore[no-untyped-def]
            if rule(a, b, words_a, words_b, cosine=None, min_cosine=None):
                return True
            if a.content.strip() == b.content.strip() or a.created_at_ms == b.created_at_ms:
                return False
            older, newer = (a, b) if a.created_at_ms < b.created_at_ms else (b, a)
            score = scores.get((older.content, newer.content))
            return score is not None and score >= threshold

        def order(q, i, m, v):  # type: ignore[no-untyped-def]
            siblings.same_attribute = same
            try:
                return siblings.newest_first(q, i, m, v)
            finally:
                siblings.same_attribute = rule
        return order

    rows = {"newest first": rr._metrics(data, lambda q, i, m, v: siblings.newest_first(q, i, m, v), args.held_out)}
    rows.update({f"+ pair logit >= {t:g}": rr._metrics(data, variant(t), args.held_out) for t in THRESHOLDS})
    for key in rows["newest first"]:
        print(f"{key:28s}", " ".join(f"{rows[v][key]:.4f}" for v in rows))
    print("columns:", " | ".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
