"""The context block is the product: evidence recall of what the SDK's ``recall`` puts in front of a model.

    .venv/bin/python -m benchmarks.quality.run --only block

For each LoCoMo conversation (one tenant, one memory per turn written as ``"<speaker>: <text>"``, as the locomo
suite writes them) and each variant of the server (its defaults; the defaults with the named speaker's factor at 1 or
the second hop off, ``search.expand_turns`` 0: ``VARIANTS``, set on the in-process pipeline between rows): recall@5 and recall@10 of a top-10 search,
and the **block evidence recall**: the share of a question's evidence turns whose text the context block holds when
the question is sent as the SDK's ``recall`` sends it (``top_k`` 5, ``context_block``, the server's relevance floor
and size rule), one query per Search from one client, timed (p50 / p95 ms). Reported per category and for the dev
conversations (``LOCOMO_DEV``: they chose the second hop's constants and the block's floors) and the held-out ones
apart; ``block_vs_top5`` is the share of the top 5's evidence the block kept.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Mapping, Sequence

import numpy as np

from benchmarks.quality.datasets import LOCOMO_CATEGORIES, Query, evaluate, load_locomo
from benchmarks.quality.harness import DEFAULTS, EvalServer
from server.lexical import analysis

log = logging.getLogger(__name__)

LOCOMO_DEV = ("conv-26", "conv-30", "conv-41")        # tuned on
LOCOMO_HELD_OUT = ("conv-42", "conv-43")              # reported only
# Each variant: the pipeline attributes set for it (the second hop's ``expand_turns``, the named speaker's
# ``speaker_factor``, the asking turns' ``question_factor``, the dense search's ``query_adapter``, the dense list's
# weight in the fusion, ``dense_weight``; a dotted name is a module's constant: the BM25 query's function words);
# ``--block-variants`` on run.py picks them by name.
VARIANTS: dict[str, dict[str, float]] = {"defaults": {}, "no speaker rule": {"speaker_factor": 1.0},
                                         "no second hop": {"expand_turns": 0},
                                         "no question rule": {"question_factor": 1.0},
                                         "question rule x0.5": {"question_factor": 0.5},
                                         "no speaker list": {"speaker_list": False},
                                         "no query adapter": {"query_adapter": None},
                                         **{f"dense weight {w}": {"dense_weight": w} for w in (0.7, 1.0, 1.25, 1.6)},
                                         "no function words in BM25": {
                                             f"{analysis.__name__}.QUERY_FUNCTION_WORDS": True},
                                         "flat BM25 query": {f"{analysis.__name__}.CONTENT_MATCH": False}}
DEFAULT_VARIANTS = ("defaults", "no speaker rule")
RERANKER_VARIANT = "reranker "   # "reranker PATH": the defaults, another cross-encoder (EvalServer.reranker_swapped)
ADAPTER_VARIANT = "query adapter "   # "query adapter PATH": another query adapter or tower (EvalServer.adapter_swapped)


def block_recall(block: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
                 query_ids: Sequence[str]) -> float:
    """Mean over ``query_ids`` of the share of each one's relevant docs that its block holds."""
    shares = [len({d for d, g in qrels[q].items() if g > 0} & set(block.get(q, ()))) /
              max(1, sum(g > 0 for g in qrels[q].values())) for q in query_ids]
    return sum(shares) / len(shares) if shares else 0.0


def _row(run: Mapping[str, Sequence[str]], block: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
         ids: Sequence[str], items: Mapping[str, int]) -> dict:
    top = evaluate(run, qrels, ks=(5, 10), query_ids=ids)
    held = block_recall(block, qrels, ids)
    return {"recall@10": round(top["recall@10"], 4), "recall@5": round(top["recall@5"], 4),
            "block_recall": round(held, 4),
            "block_vs_top5": round(held / top["recall@5"], 4) if top["recall@5"] else None,
            "block_items": round(float(np.mean([items[q] for q in ids])), 2) if ids else 0.0, "queries": len(ids)}


def category_rows(run: Mapping[str, Sequence[str]], block: Mapping[str, Sequence[str]],
                  qrels: Mapping[str, Mapping[str, int]], ids: Sequence[str], category: Mapping[str, int],
                  items: Mapping[str, int]) -> dict:
    """``_row`` over ``ids`` (``all``) and over each LoCoMo category of them (``cat1`` …)."""
    return {"all": _row(run, block, qrels, ids, items),
            **{f"cat{c}": _row(run, block, qrels, [q for q in ids if category[q] == c], items)
               for c in LOCOMO_CATEGORIES}}


def _target(pipeline: object, attr: str) -> tuple[object, str]:
    """The object and attribute a variant's key names: the pipeline's, or a module's constant (a dotted name)."""
    if "." not in attr:
        return pipeline, attr
    module, _, name = attr.rpartition(".")
    return importlib.import_module(module), name


def _block_pass(server: EvalServer, conversations: Sequence, tenants: Mapping, qrels: Mapping,  # type: ignore[type-arg]
                category: Mapping[str, int], split: Mapping[str, str]) -> dict:
    """Every question searched top 10 and as the SDK's recall (the context block): the rows by half and category."""
    run: dict[str, list[str]] = {}
    block: dict[str, list[str]] = {}
    items: dict[str, int] = {}
    times: dict[str, list[float]] = {"dev": [], "held_out": []}
    for conv in conversations:
        queries = [Query(id=q.id, text=q.text) for q in conv.questions]
        tenant, now_ms = tenants[conv.id], conv.now * 1000
        run.update(server.search(tenant, queries, DEFAULTS, now_ms=now_ms, top_k=10))
        docs, ms = server.block_docs(tenant, queries, now_ms=now_ms)
        block.update(docs)
        items.update({q: len(d) for q, d in docs.items()})
        times["dev" if conv.id in LOCOMO_DEV else "held_out"].extend(ms)
    rows: dict = {}
    for half in ("dev", "held_out", "all"):
        ids = [q for q in qrels if half == "all" or split[q] == half]
        rows[half] = category_rows(run, block, qrels, ids, category, items)
        ms = times["dev"] + times["held_out"] if half == "all" else times[half]
        rows[half]["all"].update(p50_ms=round(float(np.percentile(ms, 50)), 1),
                                 p95_ms=round(float(np.percentile(ms, 95)), 1))
    return rows


def run_block(server: EvalServer, variants: Sequence[str] = DEFAULT_VARIANTS) -> dict:
    from benchmarks.quality.suites import locomo_inputs

    conversations = load_locomo()
    engine = server._app.engine   # type: ignore[union-attr]  # the in-process server's
    pipeline = engine.search_pipeline
    saved = {attr: getattr(*_target(pipeline, attr)) for v in VARIANTS.values() for attr in v}
    tenants = {c.id: server.ingest(f"block-{c.id}", locomo_inputs(c, "speaker")) for c in conversations}
    qrels = {q.id: {d: 1 for d in q.evidence} for c in conversations for q in c.questions}
    category = {q.id: q.category for c in conversations for q in c.questions}
    split = {q.id: ("dev" if c.id in LOCOMO_DEV else "held_out") for c in conversations for q in c.questions}
    out: dict = {"dev_conversations": list(LOCOMO_DEV), "held_out_conversations": list(LOCOMO_HELD_OUT),
                 "expand_turns_default": pipeline.expand_turns, "speaker_factor_default": pipeline.speaker_factor,
                 "variants": {}}
    # Every block query is timed as a new question: no query embedding and no cross-encoder score comes from a cache
    # (the top-10 search of the same questions, and the other variant, ran before it).
    with server.caches_off():
        try:
            for name in variants:
                for attr, value in {**saved, **VARIANTS.get(name, {})}.items():
                    setattr(*_target(pipeline, attr), value)
                other = name.removeprefix(RERANKER_VARIANT) if name.startswith(RERANKER_VARIANT) else ""
                adapter = name.removeprefix(ADAPTER_VARIANT) if name.startswith(ADAPTER_VARIANT) else ""
                with (server.reranker_swapped(other) if other else contextlib.nullcontext(),
                      server.adapter_swapped(adapter) if adapter else contextlib.nullcontext()):
                    out["variants"][name] = _block_pass(server, conversations, tenants, qrels, category, split)
                log.info("block %s: dev %s, held out %s", name, out["variants"][name]["dev"]["all"],
                         out["variants"][name]["held_out"]["all"])
        finally:
            for attr, value in saved.items():
                setattr(*_target(pipeline, attr), value)
    return out


def block_table(results: Mapping) -> str:
    """The README / docs table: per variant and half, recall@10, recall@5 and block recall per category, latency."""
    data = results.get("block", {}).get("variants", {})
    lines = ["| variant | conversations | R@10 | R@5 | block | block / top 5 | items | cat 1 multi-hop block | "
             "cat 2 temporal block | cat 3 open-domain block | cat 4 single-hop block | p50 / p95 ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in data.items():
        for half in ("dev", "held_out", "all"):
            r = rows[half]
            a = r["all"]
            cats = " | ".join(f"{r[f'cat{c}']['block_recall']:.3f}" for c in LOCOMO_CATEGORIES)
            lines.append(f"| {name} | {half.replace('_', '-')} | {a['recall@10']:.3f} | {a['recall@5']:.3f} | "
                         f"{a['block_recall']:.3f} | {a['block_vs_top5'] or 0:.3f} | {a['block_items']:.2f} | {cats} | "
                         f"{a['p50_ms']:.0f} / {a['p95_ms']:.0f} |")
    return "\n".join(lines) + "\n"
