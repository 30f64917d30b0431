"""Side by side: the server's defaults with and without updates and time intent (docs/concepts/updates.md).

    .venv/bin/python -m benchmarks.quality.updates_ab [--off | --without intent,links,siblings,importance,newest]
        [--query-rules]
        [--sets updates,recency,recency_dev2,recency_held,zh,locomo] [--links] [--query-adapter PATH]

One in-process server at its defaults (as benchmarks/quality/run.py starts it), the *defaults* stage only.
``--off`` runs the same code with every feature off in process (``--without`` names some): ``time_intent.detect`` answers no intent, the
write-time linker makes no link, sibling statements get no factor (server/engine/siblings.py) and no query gets the
importance intent (server/engine/importance_intent.py), and no top 5 is reordered newest first (ranking.NEWEST_FIRST),
so the two runs differ in nothing else. ``--links`` prints every link the
writes made (the spot check of the false-link rate on LoCoMo). Prints recall@1 per set and cell, LoCoMo recall@10.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.quality import suites
from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import RECENCY_SETS, Query, load_chinese, load_locomo, load_recency, load_updates
from benchmarks.quality.harness import DEFAULTS, EvalServer, Ingested
from engram_proto.v1 import service_pb2 as spb


def _links(server: EvalServer, tenant: Ingested) -> None:
    page = server._memory.List(spb.ListRequest(tenant_id=tenant.tenant, page_size=1000), metadata=server._metadata)
    by_id = {m.memory_id: m for m in page.memories}
    for m in page.memories:
        for old in m.updates:
            print(f"  link: {by_id[old].content!r}\n     -> {m.content!r}")


FEATURES = ("intent", "links", "siblings", "importance", "newest")


def _turn_off(features: set[str]) -> None:
    """Patches the named features out of this process: no time intent, no write-time links, no sibling factor
    (server/engine/siblings.py), no importance intent (server/engine/importance_intent.py)."""
    from server.domain import TimeIntent
    from server.engine import importance_intent, siblings, time_intent, updates
    if "intent" in features:
        time_intent.detect = lambda text: TimeIntent.NONE   # type: ignore[assignment]
    if "links" in features:
        updates.find_updated = lambda *a, **k: None          # type: ignore[assignment]
    if "siblings" in features:
        siblings.sibling_factor = lambda query, intent, memory_at, relevance, **k: np.ones(len(relevance))  # type: ignore[assignment]
    if "importance" in features:
        importance_intent.importance_weight = lambda text, default: default  # type: ignore[assignment]
    if "newest" in features:
        from server.engine import ranking
        ranking.NEWEST_FIRST = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--off", action="store_true", help="every feature below off (in process)")
    parser.add_argument("--without", default="", help=f"comma-separated features to turn off: {','.join(FEATURES)}")
    parser.add_argument("--query-rules", action="store_true",
                        help="turn on ranking.SIBLING_RULE (sibling statements, off by default) in process")
    parser.add_argument("--sets", default="updates,recency,recency_dev2,recency_held,zh,locomo")
    parser.add_argument("--links", action="store_true", help="print the links the writes made")
    parser.add_argument("--query-adapter", default="",
                        help="the query adapter or tower in this folder, not the server's (EvalServer.adapter_swapped)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    without = set(FEATURES) if args.off else {f.strip() for f in args.without.split(",") if f.strip()}
    if without - set(FEATURES):
        parser.error(f"unknown features: {sorted(without - set(FEATURES))}")
    if args.query_rules:
        from server.engine import ranking
        ranking.SIBLING_RULE = True
    _turn_off(without)
    sets = args.sets.split(",")
    now_ms = suites.RECENCY_NOW_MS
    with (tempfile.TemporaryDirectory(prefix="engram-updates-ab-") as tmp, EvalServer(Path(tmp) / "data") as server,
          server.adapter_swapped(args.query_adapter) if args.query_adapter else contextlib.nullcontext()):
        if "updates" in sets:
            us = load_updates()
            cells: dict[tuple[str, str], list[bool]] = {}
            links = 0
            for user in sorted(us.queries):
                tenant = server.ingest(f"updates-{user}", suites.updates_inputs(us, user, now_ms))
                links += tenant.updates
                run = server.search(tenant, us.queries[user], DEFAULTS, now_ms=now_ms, top_k=1)
                for q in us.queries[user]:
                    cells.setdefault((us.kind[q.id], us.half[q.id]), []).append(bool(run[q.id]) and run[q.id][0] in us.qrels[q.id])
            print(f"updates: {links} links;", "; ".join(f"{k} {h} {sum(v) / len(v):.3f}" for (k, h), v in sorted(cells.items())))
        for name in [s for s in RECENCY_SETS if s in sets]:
            rs = load_recency(name=name)
            tenant = server.ingest(name, suites.recency_inputs(rs))
            if args.links:
                _links(server, tenant)
            run = server.search(tenant, rs.queries, DEFAULTS, now_ms=now_ms, top_k=10)
            by_kind = {k: [q for q in rs.kind if rs.kind[q] == k] for k in sorted(set(rs.kind.values()))}
            print(f"{name}: {tenant.updates} links; recall@1 {suites._scores(run, rs.qrels, (1,))['recall@1']:.3f};",
                  "; ".join(f"{k} {suites._scores(run, rs.qrels, (1,), ids)['recall@1']:.3f}" for k, ids in by_kind.items()))
        if "zh" in sets:
            zh = load_chinese()
            tenant = server.ingest("zh-memory", [(m.id, suites._memory_input(m)) for m in zh.memories])
            run = server.search(tenant, zh.queries, DEFAULTS, now_ms=(max(m.created_at_unix for m in zh.memories) + 86_400) * 1000,
                                top_k=10)
            print(f"zh: {tenant.updates} links; nDCG@10 {suites._scores(run, zh.qrels, (10,))['ndcg@10']:.3f}")
        if "locomo" in sets:
            runs: dict[str, list[str]] = {}
            qrels: dict[str, dict[str, int]] = {}
            groups: dict[str, list[str]] = {}
            links = 0
            for conv in load_locomo():
                tenant = server.ingest(f"locomo-{conv.id}", suites.locomo_inputs(conv, "speaker"))
                links += tenant.updates
                if args.links and tenant.updates:
                    _links(server, tenant)
                qrels.update({q.id: {d: 1 for d in q.evidence} for q in conv.questions})
                half = "dev" if conv.id in LOCOMO_DEV else "held_out"
                for q in conv.questions:
                    groups.setdefault(half, []).append(q.id)
                    groups.setdefault(f"{half} cat{q.category}", []).append(q.id)
                runs.update(server.search(tenant, [Query(id=q.id, text=q.text) for q in conv.questions], DEFAULTS,
                                          now_ms=conv.now * 1000, top_k=10))
            print(f"locomo: {links} links in {sum(len(c.turns) for c in load_locomo())} turns; recall@10 "
                  f"{suites._scores(runs, qrels, (10,))['recall@10']:.3f};",
                  "; ".join(f"{g} {suites._scores(runs, qrels, (10,), ids)['recall@10']:.3f}"
                            for g, ids in sorted(groups.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
