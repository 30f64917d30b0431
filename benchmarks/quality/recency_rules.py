"""Query-time rules for what is current, measured offline on one search pass (docs/concepts/updates.md).

    .venv/bin/python -m benchmarks.quality.recency_rules dump [--sets recency,recency_dev2,zh,updates,recency_held,locomo]
    .venv/bin/python -m benchmarks.quality.recency_rules eval [--held-out]
    .venv/bin/python -m benchmarks.quality.recency_rules misses [--set recency_dev2]   # a dev set's misses

``dump`` starts one in-process server at its defaults, writes each set, searches it once (the *defaults* stage, top
10, "as of" the set's time) and stores per query the hits in order with their memories, relevance and main vectors
(``DUMP``, in the temp directory: it holds the sets' texts). ``eval`` then applies each variant of
``siblings.newest_first`` (the rule permutes only the top ``siblings.SLOTS`` hits, so a variant needs no new search)
and prints the recency set's recall@1, the zh/en set's nDCG@10, the knowledge-update set's recall@1 per cell and
LoCoMo's recall@10 and an estimate of its block recall (the block's floors over the permuted top 5), each beside the
defaults. The held-out recency set is printed only with ``--held-out``: variants are chosen on the dev sets first.
"""

from __future__ import annotations

import argparse
import logging
import pickle
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quality import suites
from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import (RECENCY_SETS, Query, evaluate, load_chinese, load_locomo, load_recency,
                                         load_updates)
from benchmarks.quality.harness import DEFAULTS, EvalServer, docs_of_hit

# It holds the sets' texts (LoCoMo among them, which is never committed): outside the tree.
DUMP = Path(tempfile.gettempdir()) / "engram-recency-rules.pkl"
BUDGET_S = 510.0   # stop writing further sets after this long (one CPU-lock hold)


def _dump_set(server: EvalServer, tenant, queries, *, now_ms: int) -> dict:  # type: ignore[no-untyped-def]
    from server.domain import TimeIntent
    shard = server._app.engine.registry.shard(tenant.tenant)   # type: ignore[union-attr]
    hits = server.search_hits(tenant, queries, DEFAULTS, now_ms=now_ms, top_k=10)
    out = {}
    for q in queries:
        hs = hits[q.id]
        memories = [shard.store.get(h.memory.memory_id) for h in hs]
        docs = np.asarray([m.doc_id for m in memories], dtype=np.int64)
        vectors = shard.dense.reconstruct_batch(docs) if len(docs) else np.zeros((0, 1), np.float32)
        out[q.id] = {"text": q.text, "intent": TimeIntent(hs[0].breakdown.time_intent) if hs else TimeIntent.NONE,
                     "docs": [docs_of_hit(tenant, h) for h in hs], "memories": memories, "vectors": vectors,
                     "relevance": [h.breakdown.relevance for h in hs]}
    return out


def dump(sets: list[str]) -> None:
    t0 = time.monotonic()
    data: dict = {}
    now_ms = suites.RECENCY_NOW_MS
    from server.engine import ranking
    ranking.NEWEST_FIRST = False   # the pass the variants reorder: each variant applies the rule itself
    with tempfile.TemporaryDirectory(prefix="engram-recency-rules-") as tmp, EvalServer(Path(tmp) / "data") as server:
        for name in sets:
            if time.monotonic() - t0 > BUDGET_S:
                logging.warning("time budget spent: %s not written", name)
                continue
            if name in RECENCY_SETS:
                rs = load_recency(name=name)
                tenant = server.ingest(name, suites.recency_inputs(rs))
                data[name] = {"runs": _dump_set(server, tenant, rs.queries, now_ms=now_ms), "qrels": rs.qrels,
                              "kind": rs.kind, "lang": rs.lang}
            elif name == "zh":
                zh = load_chinese()
                tenant = server.ingest("zh-memory", [(m.id, suites._memory_input(m)) for m in zh.memories])
                zh_now = (max(m.created_at_unix for m in zh.memories) + 86_400) * 1000
                data[name] = {"runs": _dump_set(server, tenant, zh.queries, now_ms=zh_now), "qrels": zh.qrels}
            elif name == "updates":
                us = load_updates()
                runs: dict = {}
                for user in sorted(us.queries):
                    tenant = server.ingest(f"updates-{user}", suites.updates_inputs(us, user, now_ms))
                    runs.update(_dump_set(server, tenant, us.queries[user], now_ms=now_ms))
                data[name] = {"runs": runs, "qrels": us.qrels, "cell": {q: f"{us.kind[q]} {us.half[q]}" for q in us.qrels}}
            elif name == "locomo":
                runs, qrels, group = {}, {}, {}
                for conv in load_locomo():
                    tenant = server.ingest(f"locomo-{conv.id}", suites.locomo_inputs(conv, "speaker"))
                    half = "dev" if conv.id in LOCOMO_DEV else "held_out"
                    qrels.update({q.id: {d: 1 for d in q.evidence} for q in conv.questions})
                    group.update({q.id: (half, q.category) for q in conv.questions})
                    runs.update(_dump_set(server, tenant, [Query(id=q.id, text=q.text) for q in conv.questions],
                                          now_ms=conv.now * 1000))
                data[name] = {"runs": runs, "qrels": qrels, "group": group}
            logging.warning("%s dumped at %.0f s", name, time.monotonic() - t0)
            with DUMP.open("wb") as f:
                pickle.dump(data, f)


def _permuted(run: dict, rule) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """The hits' eval docs after ``rule`` (None: the defaults) reorders the top ``siblings.SLOTS``."""
    from server.engine import siblings
    docs = run["docs"]
    if rule is None or not docs:
        return docs
    n = min(siblings.SLOTS, len(docs))
    order = rule(run["text"], run["intent"], run["memories"][:n], run["vectors"][:n])
    return [docs[i] for i in order] + docs[n:]


def _block(run: dict, order_docs: list[list[str]], rule) -> list[str]:  # type: ignore[no-untyped-def]
    """The docs the context block would hold (server/engine/context.py's floors over the top 5, in slot order)."""
    from server.engine import context, siblings
    rel = run["relevance"]
    n = min(siblings.SLOTS, len(rel))
    order = list(range(n)) if rule is None else rule(run["text"], run["intent"], run["memories"][:n], run["vectors"][:n])
    out = []
    for slot, i in enumerate(order[:5]):
        floor = context.HEAD_MIN_RELEVANCE if slot < context.BLOCK_HEAD else context.MIN_RELEVANCE
        if rel[i] >= floor:
            out.extend(run["docs"][i])
    return out


def _metrics(data: dict, rule, held_out: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
    out: dict[str, float] = {}
    for name in RECENCY_SETS:
        if name not in data or ("held" in name and not held_out):
            continue
        d = data[name]
        hits = {q: _flat(_permuted(r, rule)) for q, r in d["runs"].items()}
        for group in ("all", "newer", "recent", "importance", "past", "keep"):
            ids = [q for q in hits if group == "all" or d["kind"][q] == group]
            if not ids:
                continue
            out[f"{name} {group}"] = float(np.mean([bool(hits[q]) and hits[q][0] in d["qrels"][q] for q in ids]))
    if "zh" in data:
        d = data["zh"]
        runs = {q: _flat(_permuted(r, rule)) for q, r in d["runs"].items()}
        out["zh ndcg@10"] = evaluate(runs, d["qrels"], ks=(10,))["ndcg@10"]
    if "updates" in data:
        d = data["updates"]
        for cell in sorted(set(d["cell"].values())):
            ids = [q for q in d["runs"] if d["cell"][q] == cell]
            out[f"updates {cell}"] = float(np.mean([bool(h) and h[0] in d["qrels"][q] for q in ids
                                                    for h in [_flat(_permuted(d["runs"][q], rule))]]))
    if "locomo" in data:
        d = data["locomo"]
        runs = {q: _flat(_permuted(r, rule)) for q, r in d["runs"].items()}
        blocks = {q: _block(r, runs[q], rule) for q, r in d["runs"].items()}
        for half in ("dev", "held_out"):
            for cat in (None, 1, 2, 3, 4):
                ids = [q for q, (h, c) in d["group"].items() if h == half and (cat is None or c == cat)]
                tag = f"locomo {half}" + (f" cat{cat}" if cat else "")
                out[f"{tag} R@10"] = evaluate(runs, d["qrels"], ks=(10,), query_ids=ids)["recall@10"]
                shares = [len(set(d["qrels"][q]) & set(blocks[q])) / len(d["qrels"][q]) for q in ids if d["qrels"][q]]
                out[f"{tag} block~"] = float(np.mean(shares))
    return out


def _flat(docs: list[list[str]]) -> list[str]:
    return [d for x in docs for d in x]


def variants() -> dict:  # type: ignore[type-arg]
    """No reorder (the pass as dumped, ranking.NEWEST_FIRST off), the rule at its constants, and the alternatives
    measured beside it."""
    from server.engine import siblings

    return {"no reorder": None, "newest first": lambda q, i, m, v: siblings.newest_first(q, i, m, v),
            **{f"match jaccard {j:.2f}": (lambda q, i, m, v, j=j: _with("MATCH_JACCARD", j, q, i, m, v))
               for j in (0.5, 0.34)},
            "no newer superset": lambda q, i, m, v: _with("NEWER_SUPERSET", False, q, i, m, v),
            **{f"+ pair cosine {c:.2f}": (lambda q, i, m, v, c=c: siblings.newest_first(q, i, m, v, min_cosine=c))
               for c in (0.86, 0.90)},
            **{f"+ pair cosine {c:.2f} if the newer names a change": (
                lambda q, i, m, v, c=c: _with("PAIR_NEEDS_CHANGE", True, q, i, m, v, min_cosine=c))
               for c in (0.82, 0.86)},
            "single CJK chars": lambda q, i, m, v: siblings.newest_first(q, i, m, v, single_cjk=True),
            "no subject words removed": lambda q, i, m, v: _with_share(1, q, i, m, v),
            "any common word a subject": lambda q, i, m, v: _with("SUBJECT_WORDS", None, q, i, m, v),
            "entities not compared": _without_entities}


def _without_entities(*args):  # type: ignore[no-untyped-def]
    from server.engine import siblings
    siblings.ENTITIES = False
    try:
        return siblings.newest_first(*args)
    finally:
        siblings.ENTITIES = True


def _with_share(share: float, *args):  # type: ignore[no-untyped-def]
    return _with("COMMON_SHARE", share, *args)


def _with(name: str, value: object, *args, **kw):  # type: ignore[no-untyped-def]
    """siblings.newest_first with one of its module constants set to ``value`` for the call."""
    from server.engine import siblings
    before = getattr(siblings, name)
    setattr(siblings, name, value)
    try:
        return siblings.newest_first(*args, **kw)
    finally:
        setattr(siblings, name, before)


def evaluate_variants(*, held_out: bool) -> None:
    with DUMP.open("rb") as f:
        data = pickle.load(f)
    rows = {name: _metrics(data, rule, held_out) for name, rule in variants().items()}
    base = rows["no reorder"]
    for key in base:
        print(f"{key:28s}", " ".join(f"{rows[v][key]:.4f}" for v in rows))
    print("columns:", " | ".join(rows))


def misses(name: str = "recency") -> None:
    """The failure analysis: each miss of ``name`` at the defaults, its top 5 with relevance and pair cosines."""
    with DUMP.open("rb") as f:
        d = pickle.load(f)[name]
    for q, r in d["runs"].items():
        flat = _flat(r["docs"])
        if flat and flat[0] in d["qrels"][q]:
            continue
        answer = next(iter(d["qrels"][q]))
        print(f"MISS {q} [{d['kind'][q]}] {r['text']!r} intent={r['intent'].name} answer at "
              f"{flat.index(answer) + 1 if answer in flat else 0}")
        cos = r["vectors"][:5] @ r["vectors"][:5].T
        for j, (docs, m) in enumerate(list(zip(r["docs"], r["memories"], strict=True))[:5]):
            print(f"   {','.join(docs):6s} rel {r['relevance'][j]:.3f} links {len(m.updates)}/{int(bool(m.updated_by))} "
                  f"cos {' '.join(f'{x:.2f}' for x in cos[j])} {m.content[:60]!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("dump", "eval", "misses"))
    parser.add_argument("--sets", default="recency,recency_dev2,zh,updates,recency_held,locomo")
    parser.add_argument("--held-out", action="store_true", help="also the held-out recency set (after choosing)")
    parser.add_argument("--set", default="recency", choices=("recency", "recency_dev2"), help="misses: which dev set")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.what == "dump":
        dump(args.sets.split(","))
    elif args.what == "eval":
        evaluate_variants(held_out=args.held_out)
    else:
        misses(args.set)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
