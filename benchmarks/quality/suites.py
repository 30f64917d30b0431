"""The three evaluations, each ingesting through the server and scoring every stage of one tenant.

* SciFact (test split, one tenant): nDCG@10, recall@10, recall@100; RRF k and list weights tuned on
  the train split's queries only (offline fusion of the server's two lists), then reported on test.
* LoCoMo (one tenant per conversation, one memory per turn, created_at = its session's time):
  recall@5, recall@10, nDCG@10 overall and per category; raw turn text and, as a write-side option,
  text contextualised with speaker and date.
* The zh/en agent-memory set (one tenant): nDCG@10, recall@5, overall and per query language;
  ``dense_weight_cjk`` tuned on a dev half of the queries and reported on the other half.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone

from benchmarks.quality.datasets import (
    LOCOMO_CATEGORIES,
    Query,
    RecencySet,
    contextualise,
    evaluate,
    load_chinese,
    load_locomo,
    load_recency,
    load_scifact,
)
from benchmarks.quality.fusion import Setting, fuse, grid, settings_grid
from benchmarks.quality.harness import (BM25, DEFAULTS, DENSE, HYBRID, LIVE, RERANK, SECOND_ROUND, EvalServer, Ingested,
                                        Stage, docs_of_hit)
from server.config import DAY_S
from server.engine.search import DENSE_WEIGHT, DENSE_WEIGHT_CJK, DENSE_WEIGHT_CODE, LEXICAL_WEIGHT, RRF_K
from engram_proto.v1 import messages_pb2 as pb
from server.text import has_cjk, has_code

log = logging.getLogger(__name__)

FIXED_NOW_MS = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
# Ablations beside the defaults: the reranked hybrid with only the temporal boost on (no decay, no
# importance), and the original design's plain multiplicative curve (recency weight 1: final = relevance ×
# 0.5^(age / half-life) × importance factor), which the bounded default replaced (README "Ranking").
DECAY_OFF_TEMPORAL = Stage("hybrid+rerank+temporal", rerank=True, temporal=True)
OLD_DESIGN = Stage("defaults, plain half-life curve", defaults=True, recency_weight=1.0)


def _scores(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], ks: Sequence[int],
            query_ids: Sequence[str] | None = None) -> dict[str, float]:
    return {k: round(v, 4) for k, v in evaluate(run, qrels, ks=ks, query_ids=query_ids).items()}


def _stages(server: EvalServer, *extra: Stage) -> list[Stage]:
    return [BM25, DENSE, HYBRID] + ([RERANK] if server.has_reranker else []) + [SECOND_ROUND, *extra]


def _server_setting() -> Setting:
    return Setting(k=RRF_K, dense_weight=DENSE_WEIGHT, lexical_weight=LEXICAL_WEIGHT)


def _code_scale(texts: Mapping[str, str]) -> Callable[[str], float]:
    """The server's per-query dense multiplier (CJK and code-like queries), for offline fusion."""

    def scale(qid: str) -> float:
        text = texts[qid]
        return (DENSE_WEIGHT_CJK if has_cjk(text) else 1.0) * (DENSE_WEIGHT_CODE if has_code(text) else 1.0)
    return scale


# -------------------------------------------------------------------------------------------- SciFact

def run_scifact(server: EvalServer) -> dict:
    test, train = load_scifact(split="test"), load_scifact(split="train")
    items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id)) for d in test.docs]
    tenant = server.ingest("scifact", items)
    ks = (10, 100)
    out: dict = {"docs": len(test.docs), "memories": tenant.memories, "merged": tenant.merged,
                 "ingest_s": round(tenant.seconds, 1), "queries": len(test.queries), "stages": {}}
    runs: dict[str, dict[str, list[str]]] = {}
    # LIVE last: its searches record accesses (the others are "as of" and read none of them back).
    for stage in [DEFAULTS, *_stages(server), LIVE]:
        runs[stage.name] = server.search(tenant, test.queries, stage, now_ms=FIXED_NOW_MS, top_k=100)
        out["stages"][stage.name] = _scores(runs[stage.name], test.qrels, ks)
        log.info("scifact %s: %s", stage.name, out["stages"][stage.name])
    # The server's hybrid must equal the offline fusion of its own two lists (same k and weights).
    texts = {q.id: q.text for q in test.queries}
    offline = fuse(runs["dense"], runs["bm25"], _server_setting(), dense_scale=_code_scale(texts))
    out["offline_fusion_check"] = _scores(offline, test.qrels, ks)["ndcg@10"]

    # Tuning: the train split only.
    train_dense = server.search(tenant, train.queries, DENSE, now_ms=FIXED_NOW_MS, top_k=100)
    train_bm25 = server.search(tenant, train.queries, BM25, now_ms=FIXED_NOW_MS, top_k=100)
    train_texts = {q.id: q.text for q in train.queries}
    ranked = grid(train_dense, train_bm25, train.qrels, settings_grid(), dense_scale=_code_scale(train_texts))
    best, best_train = ranked[0]
    current_train = dict(grid(train_dense, train_bm25, train.qrels, [_server_setting()],
                              dense_scale=_code_scale(train_texts)))[_server_setting()]
    tuned_test = fuse(runs["dense"], runs["bm25"], best, dense_scale=_code_scale(texts))
    out["tuning"] = {
        "split": "train", "queries": len(train.queries),
        "server_setting": vars(_server_setting()), "server_setting_train_ndcg@10": round(current_train, 4),
        "best_setting": vars(best), "best_train_ndcg@10": round(best_train, 4),
        "best_setting_test_ndcg@10": _scores(tuned_test, test.qrels, ks)["ndcg@10"],
        "top5": [{**vars(s), "train_ndcg@10": round(v, 4)} for s, v in ranked[:5]],
        "train_bm25_ndcg@10": _scores(train_bm25, train.qrels, ks)["ndcg@10"],
        "train_dense_ndcg@10": _scores(train_dense, train.qrels, ks)["ndcg@10"],
    }
    # Queries with code-like tokens: does the server's dense_weight_code help or hurt them?
    coded = [q for q in train.queries if has_code(q.text)]
    plain = _server_setting()
    with_scale = fuse(train_dense, train_bm25, plain, dense_scale=_code_scale(train_texts))
    without = fuse(train_dense, train_bm25, plain)
    ids = [q.id for q in coded]
    out["tuning"]["code_queries"] = {
        "queries": len(coded), "dense_weight_code": DENSE_WEIGHT_CODE,
        "ndcg@10_with": _scores(with_scale, train.qrels, ks, ids)["ndcg@10"] if ids else None,
        "ndcg@10_without": _scores(without, train.qrels, ks, ids)["ndcg@10"] if ids else None,
    }
    log.info("scifact tuning: %s", out["tuning"])
    return out


# --------------------------------------------------------------------------------------------- LoCoMo

LOCOMO_VARIANTS = ("speaker", "conversation", "raw", "contextualised")


def locomo_inputs(conv, variant: str = "speaker") -> list[tuple[str, pb.MemoryInput]]:  # type: ignore[no-untyped-def]
    """One EPISODIC memory per turn, ``created_at`` = its session's time. ``speaker`` (the headline, as a user
    writes a chat): ``"<speaker>: <text>"``; ``conversation``: the same with the previous turn as its
    ``context`` (what the SDK's ``write_conversation`` sends); ``raw``: the text alone; ``contextualised``:
    ``"[8 May 2023] <speaker>: <text>"`` hand-made, as before the server indexed the date itself."""
    out = []
    previous = ""
    for t in conv.turns:
        said = f"{t.speaker}: {t.text}"
        content = {"speaker": said, "conversation": said, "raw": t.text, "contextualised": contextualise(t)}[variant]
        out.append((t.id, pb.MemoryInput(content=content, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=t.created_at * 1000,
                                         source_ref=t.id, context=previous if variant == "conversation" else "")))
        previous = said
    return out


FLOORS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)


def relevance_floor_table(pairs, qrels, *, top: int = 5) -> list[dict]:  # type: ignore[no-untyped-def]
    """For each context-block floor (search.min_relevance): of the top-5 hits at the defaults, the share of
    answers (judged relevant) kept and the share of the others left out."""
    rel: list[tuple[float, bool]] = []
    for tenant, hits in pairs:
        for qid, hs in hits.items():
            for h in hs[:top]:
                good = any(qrels.get(qid, {}).get(d, 0) > 0 for d in docs_of_hit(tenant, h))
                rel.append((h.breakdown.relevance, good))
    answers = [r for r, g in rel if g]
    others = [r for r, g in rel if not g]
    return [{"min_relevance": t, "answers_kept": round(sum(r >= t for r in answers) / max(1, len(answers)), 4),
             "others_dropped": round(sum(r < t for r in others) / max(1, len(others)), 4),
             "answers": len(answers), "others": len(others)} for t in FLOORS]


def _locomo_grid(server: EvalServer, conversations, variant: str, qrels) -> list[dict]:  # type: ignore[no-untyped-def]
    """:func:`weight_grid` over every conversation (each its own tenant, its own "now"), recall@10 pooled."""
    pooled: dict[tuple[float, float], dict[str, float]] = {}
    total = 0
    server.grid_hits = []
    for conv in conversations:
        tenant = Ingested(tenant=f"locomo-{variant}-{conv.id}", docs_of=server.docs_of[f"locomo-{variant}-{conv.id}"])
        queries = [Query(id=q.id, text=q.text) for q in conv.questions]
        rows = weight_grid(server, tenant, queries, qrels, now_ms=conv.now * 1000)
        server.grid_hits.append(server.last_grid_hits)
        for row in rows:
            acc = pooled.setdefault((row["recency_weight"], row["importance_weight"]), {})
            for key in ("recall@5", "recall@10", "ndcg@10"):
                acc[key] = acc.get(key, 0.0) + row[key] * row["queries"]
        total += int(rows[0]["queries"])
    return [{"recency_weight": a, "importance_weight": b, **{k: round(v / total, 4) for k, v in acc.items()}}
            for (a, b), acc in pooled.items()]


def run_locomo(server: EvalServer, *, variants: Sequence[str] = ("speaker", "conversation")) -> dict:
    conversations = load_locomo()
    out: dict = {"conversations": len(conversations), "turns": sum(len(c.turns) for c in conversations),
                 "questions": sum(len(c.questions) for c in conversations), "variants": {}}
    ks = (5, 10)
    for variant in variants:
        runs: dict[str, dict[str, list[str]]] = {}
        qrels: dict[str, dict[str, int]] = {}
        category: dict[str, int] = {}
        merged = 0
        for conv in conversations:
            tenant = server.ingest(f"locomo-{variant}-{conv.id}", locomo_inputs(conv, variant))
            merged += tenant.merged
            queries = [Query(id=q.id, text=q.text) for q in conv.questions]
            for q in conv.questions:
                qrels[q.id] = {dia: 1 for dia in q.evidence}
                category[q.id] = q.category
            stages = [DEFAULTS] + (_stages(server, DECAY_OFF_TEMPORAL, OLD_DESIGN) if variant == variants[0] else [])
            for stage in stages:
                found = server.search(tenant, queries, stage, now_ms=conv.now * 1000, top_k=10)
                runs.setdefault(stage.name, {}).update(found)
        result: dict = {"merged": merged, "stages": {}}
        if variant == variants[0]:
            result["weight_grid"] = _locomo_grid(server, conversations, variant, qrels)
            result["relevance_floor"] = relevance_floor_table(server.grid_hits, qrels)
        for name, run in runs.items():
            scores = {"all": _scores(run, qrels, ks)}
            for cat in LOCOMO_CATEGORIES:
                scores[f"cat{cat}"] = _scores(run, qrels, ks, [q for q, c in category.items() if c == cat])
            result["stages"][name] = scores
            log.info("locomo %s %s: %s", variant, name, scores["all"])
        out["variants"][variant] = result
    return out


# -------------------------------------------------------------------------------------------- Chinese

def _memory_input(m) -> pb.MemoryInput:  # type: ignore[no-untyped-def]
    # The set's ``key`` is not sent: several memories share a key without a scope (three allergies) and
    # the slot rule would supersede all but the newest; retrieval is measured here, not slot semantics.
    mtype = {"episodic": pb.MEMORY_TYPE_EPISODIC, "semantic": pb.MEMORY_TYPE_SEMANTIC,
             "procedural": pb.MEMORY_TYPE_PROCEDURAL}[m.type]
    return pb.MemoryInput(content=m.content, type=mtype, importance=m.importance, pinned=m.pinned,
                          entities=list(m.entities), created_at_ms=m.created_at_unix * 1000, scope=m.scope or "",
                          source_ref=m.id, metadata={"eval_key": m.key} if m.key else {})


def run_chinese(server: EvalServer) -> dict:
    zh = load_chinese()
    tenant: Ingested = server.ingest("zh-memory", [(m.id, _memory_input(m)) for m in zh.memories])
    now_ms = (max(m.created_at_unix for m in zh.memories) + 86_400) * 1000
    ks = (5, 10)
    # The dev half (even positions of the sorted ids) tunes DENSE_WEIGHT_CJK; every stage is also reported on the
    # held-out half, and each half's Chinese queries.
    order = sorted(q.id for q in zh.queries)
    dev, held = order[0::2], order[1::2]
    langs = {lang: [q for q, ql in zh.query_lang.items() if ql == lang] for lang in ("zh", "en")}
    groups = {**langs, "dev": dev, "held_out": held,
              "dev zh": [q for q in dev if zh.query_lang[q] == "zh"],
              "held_out zh": [q for q in held if zh.query_lang[q] == "zh"]}
    out: dict = {"memories": len(zh.memories), "queries": len(zh.queries), "merged": tenant.merged,
                 "stages": {}}
    runs: dict[str, dict[str, list[str]]] = {}
    for stage in [DEFAULTS, *_stages(server, OLD_DESIGN)]:
        runs[stage.name] = server.search(tenant, zh.queries, stage, now_ms=now_ms, top_k=10)
        out["stages"][stage.name] = {"all": _scores(runs[stage.name], zh.qrels, ks),
                                     **{g: _scores(runs[stage.name], zh.qrels, ks, ids) for g, ids in groups.items()}}
        log.info("zh %s: %s", stage.name, out["stages"][stage.name]["all"])
    table = _served_cjk_grid(server, tenant, zh.queries, zh.qrels, now_ms=now_ms, dev=dev, held=held)
    best = max(r["dev_ndcg@10"] for r in table)
    chosen = min(r["dense_weight_cjk"] for r in table if r["dev_ndcg@10"] >= best - CJK_WEIGHT_TOLERANCE)
    out["cjk_weight"] = {"server_default": DENSE_WEIGHT_CJK, "dev_queries": len(dev),
                         "held_out_queries": len(held), "chosen_on_dev": chosen,
                         "rule": f"the smallest factor within {CJK_WEIGHT_TOLERANCE} of the best dev nDCG@10",
                         "grid": table,
                         "held_out_bm25_ndcg@10": _scores(runs["bm25"], zh.qrels, ks, held)["ndcg@10"]}
    log.info("zh dense_weight_cjk: %s", out["cjk_weight"])
    return out


CJK_WEIGHT_GRID = (1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 50.0, 100.0, 1000.0)
CJK_WEIGHT_TOLERANCE = 0.005


def _served_cjk_grid(server: EvalServer, tenant: Ingested, queries: Sequence[Query],
                     qrels: Mapping[str, Mapping[str, int]], *, now_ms: int, dev: Sequence[str],
                     held: Sequence[str]) -> list[dict]:
    """What chose DENSE_WEIGHT_CJK: the defaults stage served at each factor of the grid (the in-process server's
    search stage reads the module constant per query: set for each row, restored after), on both halves."""
    from server.engine import search as search_stage

    saved, rows = search_stage.DENSE_WEIGHT_CJK, []
    try:
        for factor in CJK_WEIGHT_GRID:
            search_stage.DENSE_WEIGHT_CJK = factor
            run = server.search(tenant, queries, DEFAULTS, now_ms=now_ms, top_k=10)
            rows.append({"dense_weight_cjk": factor, "dev_ndcg@10": _scores(run, qrels, (10,), dev)["ndcg@10"],
                         "held_out_ndcg@10": _scores(run, qrels, (10,), held)["ndcg@10"]})
    finally:
        search_stage.DENSE_WEIGHT_CJK = saved
    return rows


# ------------------------------------------------------------------------------------------- Recency

RECENCY_NOW_MS = FIXED_NOW_MS
WEIGHT_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def _beats_stale(run: Mapping[str, Sequence[str]], rs) -> float:  # type: ignore[no-untyped-def]
    """Share of queries whose answer ranks above every one of its stale twins (absent = below)."""
    wins = 0
    for qid, stale in rs.stale.items():
        ranked = list(run.get(qid, ()))
        answer = next(iter(rs.qrels[qid]))
        pos = ranked.index(answer) if answer in ranked else len(ranked) + 1
        wins += all(pos < (ranked.index(s) if s in ranked else len(ranked) + 2) for s in stale)
    return round(wins / len(rs.stale), 4)


def recency_inputs(rs) -> list[tuple[str, pb.MemoryInput]]:  # type: ignore[no-untyped-def]
    """A recency set's memories, each created ``age_days`` before RECENCY_NOW_MS, no key."""
    types = {"episodic": pb.MEMORY_TYPE_EPISODIC, "semantic": pb.MEMORY_TYPE_SEMANTIC,
             "procedural": pb.MEMORY_TYPE_PROCEDURAL}
    return [(m.id, pb.MemoryInput(content=m.content, type=types[m.type], importance=m.importance,
                                  created_at_ms=int(RECENCY_NOW_MS - m.age_days * DAY_S * 1000), source_ref=m.id))
            for m in rs.memories]


def _recency_stages(server: EvalServer, name: str, stages: Sequence[Stage]) -> tuple[dict, Ingested, RecencySet]:
    rs = load_recency(name=name)
    tenant = server.ingest(name, recency_inputs(rs))
    groups = {"all": None, **{f"lang={v}": [q for q, lang in rs.lang.items() if lang == v] for v in ("en", "zh")},
              **{f"kind={v}": [q for q, kind in rs.kind.items() if kind == v] for v in ("newer", "recent", "importance")}}
    out: dict = {"memories": tenant.memories, "queries": len(rs.queries), "merged": tenant.merged,
                 "update_links": tenant.updates, "stages": {}}
    for stage in stages:
        run = server.search(tenant, rs.queries, stage, now_ms=RECENCY_NOW_MS, top_k=10)
        out["stages"][stage.name] = {"beats_stale": _beats_stale(run, rs),
                                     **{g: _scores(run, rs.qrels, (1, 10), ids) for g, ids in groups.items()}}
        log.info("%s %s: %s", name, stage.name, out["stages"][stage.name]["all"])
    return out, tenant, rs


def run_recency(server: EvalServer) -> dict:
    """The dev recency set (every stage, the weight grid) and, under ``held_out``, the held-out one (written later,
    never tuned on: benchmarks/quality/data/recency_held_*), every stage."""
    stages = [DEFAULTS, *_stages(server, OLD_DESIGN)]
    out, tenant, rs = _recency_stages(server, "recency", stages)
    out["weight_grid"] = weight_grid(server, tenant, rs.queries, rs.qrels, now_ms=RECENCY_NOW_MS,
                                     extra=lambda run: {"beats_stale": _beats_stale(run, rs)})
    out["relevance_floor"] = relevance_floor_table([server.last_grid_hits], rs.qrels)
    out["held_out"] = _recency_stages(server, "recency_held", stages)[0]
    return out


def weight_grid(server: EvalServer, tenant: Ingested, queries, qrels, *, now_ms: int,  # type: ignore[no-untyped-def]
                extra=None, top_k: int = 10) -> list[dict]:
    """What chose scoring.recency_weight (a) and importance_weight (b): one search at the defaults returns each
    query's top 100 with their breakdowns, and every (a, b) re-scores them offline with the server's formula
    ``relevance × ((1 - a) + a × decay) × ((1 - b) + b × importance) × temporal`` (exact for "as of" searches,
    which carry no access boost; a top 10 under other weights lies inside the defaults' top 100)."""
    hits = server.search_hits(tenant, queries, DEFAULTS, now_ms=now_ms, top_k=100)
    server.last_grid_hits = (tenant, hits)   # the context-block floor table reads them (relevance_floor_table)
    rows = []
    for a in WEIGHT_GRID:
        for b in (0.0, 0.1, 0.2, 0.3, 0.5):
            run = {}
            for qid, hs in hits.items():
                scored = sorted(((-h.breakdown.relevance * ((1 - a) + a * h.breakdown.decay)
                                  * ((1 - b) + b * h.memory.importance) * h.breakdown.temporal, i, h)
                                 for i, h in enumerate(hs)), key=lambda t: (t[0], t[1]))
                run[qid] = [d for _, _, h in scored[:top_k] for d in docs_of_hit(tenant, h)]
            row = {"recency_weight": a, "importance_weight": b,
                   **_scores(run, qrels, (5, 10), [q.id for q in queries])}
            if extra is not None:
                row.update(extra(run))
            rows.append(row)
    return rows


# ----------------------------------------------------------------------------------- Knowledge updates

def updates_inputs(rs, user: str, now_ms: int) -> list[tuple[str, pb.MemoryInput]]:  # type: ignore[no-untyped-def]
    """One user's memories (oldest first, as a user would have written them), ``created_at`` from their age."""
    types = {"episodic": pb.MEMORY_TYPE_EPISODIC, "semantic": pb.MEMORY_TYPE_SEMANTIC,
             "procedural": pb.MEMORY_TYPE_PROCEDURAL}
    mine = sorted((m for m in rs.memories if m.user == user), key=lambda m: (-m.age_days, m.id))
    return [(m.id, pb.MemoryInput(content=m.content, type=types[m.type], scope=m.scope, source_ref=m.id,
                                  created_at_ms=int(now_ms - m.age_days * DAY_S * 1000))) for m in mine]


def run_updates(server: EvalServer) -> dict:
    """The knowledge-update set (benchmarks/quality/make_updates.py): one tenant per user, every memory written
    through Write (the server links updates itself), each question "as of" the set's now; recall@1 by kind
    (now / before / first), half (dev: odd users, held out: even) and language, and how many links the writes made."""
    from benchmarks.quality.datasets import load_updates

    rs = load_updates()
    now_ms = RECENCY_NOW_MS
    ks = (1, 10)
    out: dict = {"memories": len(rs.memories), "queries": len(rs.qrels), "stages": {}, "links": 0}
    tenants = {}
    for user in sorted(rs.queries):
        tenants[user] = server.ingest(f"updates-{user}", updates_inputs(rs, user, now_ms))
        out["links"] += tenants[user].updates
    out["chains_links_expected"] = sum(1 for m in rs.memories if not m.id.split("-")[-1].startswith(("0", "d")))
    groups: dict[str, list[str] | None] = {"all": None}
    for half in ("dev", "held_out"):
        for kind in ("now", "before", "first"):
            groups[f"{half} {kind}"] = [q for q in rs.qrels if rs.half[q] == half and rs.kind[q] == kind]
    for kind in ("now", "before", "first"):
        groups[kind] = [q for q in rs.qrels if rs.kind[q] == kind]
        for lang in ("en", "zh"):
            groups[f"{lang} {kind}"] = [q for q in rs.qrels if rs.kind[q] == kind and rs.lang[q] == lang]
    for stage in [DEFAULTS, *_stages(server)]:
        run: dict[str, list[str]] = {}
        for user, queries in rs.queries.items():
            run.update(server.search(tenants[user], queries, stage, now_ms=now_ms, top_k=10))
        out["stages"][stage.name] = {g: _scores(run, rs.qrels, ks, ids) for g, ids in groups.items()}
        log.info("updates %s: %s", stage.name, {g: v["recall@1"] for g, v in out["stages"][stage.name].items()
                                                 if g in ("now", "before", "first")})
    return out
