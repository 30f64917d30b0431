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
    contextualise,
    evaluate,
    load_chinese,
    load_locomo,
    load_scifact,
)
from benchmarks.quality.fusion import Setting, fuse, grid, settings_grid
from benchmarks.quality.harness import BM25, DECAY, DENSE, HYBRID, RERANK, EvalServer, Ingested, Stage
from server.config import DAY_S, SearchConfig
from server.engine.search import has_cjk
from server.grpc.gen.engram.v1 import messages_pb2 as pb
from server.lexical.analysis import has_code

log = logging.getLogger(__name__)

FIXED_NOW_MS = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
DECAY_30D = Stage("hybrid+decay(30d)", decay=True, half_life_s=30 * DAY_S)
DECAY_FLOOR = Stage("hybrid+decay(floor 0.8)", decay=True, decay_floor=0.8)


def _scores(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], ks: Sequence[int],
            query_ids: Sequence[str] | None = None) -> dict[str, float]:
    return {k: round(v, 4) for k, v in evaluate(run, qrels, ks=ks, query_ids=query_ids).items()}


def _stages(server: EvalServer, *extra: Stage) -> list[Stage]:
    return [BM25, DENSE, HYBRID] + ([RERANK] if server.has_reranker else []) + list(extra)


def _server_setting(cfg: SearchConfig) -> Setting:
    return Setting(k=cfg.rrf_k, dense_weight=cfg.dense_weight, lexical_weight=cfg.lexical_weight)


def _code_scale(texts: Mapping[str, str], cfg: SearchConfig, *, cjk: float | None = None) -> Callable[[str], float]:
    """The server's per-query dense multiplier (CJK and code-like queries), for offline fusion."""
    cjk_factor = cfg.dense_weight_cjk if cjk is None else cjk

    def scale(qid: str) -> float:
        text = texts[qid]
        return (cjk_factor if has_cjk(text) else 1.0) * (cfg.dense_weight_code if has_code(text) else 1.0)
    return scale


# -------------------------------------------------------------------------------------------- SciFact

def run_scifact(server: EvalServer) -> dict:
    test, train = load_scifact(split="test"), load_scifact(split="train")
    cfg = server.config.search
    items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id)) for d in test.docs]
    tenant = server.ingest("scifact", items)
    ks = (10, 100)
    out: dict = {"docs": len(test.docs), "memories": tenant.memories, "merged": tenant.merged,
                 "ingest_s": round(tenant.seconds, 1), "queries": len(test.queries), "stages": {}}
    runs: dict[str, dict[str, list[str]]] = {}
    for stage in _stages(server):
        runs[stage.name] = server.search(tenant, test.queries, stage, now_ms=FIXED_NOW_MS, top_k=100)
        out["stages"][stage.name] = _scores(runs[stage.name], test.qrels, ks)
        log.info("scifact %s: %s", stage.name, out["stages"][stage.name])
    # The server's hybrid must equal the offline fusion of its own two lists (same k and weights).
    texts = {q.id: q.text for q in test.queries}
    offline = fuse(runs["dense"], runs["bm25"], _server_setting(cfg), dense_scale=_code_scale(texts, cfg))
    out["offline_fusion_check"] = _scores(offline, test.qrels, ks)["ndcg@10"]

    # Tuning: the train split only.
    train_dense = server.search(tenant, train.queries, DENSE, now_ms=FIXED_NOW_MS, top_k=100)
    train_bm25 = server.search(tenant, train.queries, BM25, now_ms=FIXED_NOW_MS, top_k=100)
    train_texts = {q.id: q.text for q in train.queries}
    ranked = grid(train_dense, train_bm25, train.qrels, settings_grid(), dense_scale=_code_scale(train_texts, cfg))
    best, best_train = ranked[0]
    current_train = dict(grid(train_dense, train_bm25, train.qrels, [_server_setting(cfg)],
                              dense_scale=_code_scale(train_texts, cfg)))[_server_setting(cfg)]
    tuned_test = fuse(runs["dense"], runs["bm25"], best, dense_scale=_code_scale(texts, cfg))
    out["tuning"] = {
        "split": "train", "queries": len(train.queries),
        "server_setting": vars(_server_setting(cfg)), "server_setting_train_ndcg@10": round(current_train, 4),
        "best_setting": vars(best), "best_train_ndcg@10": round(best_train, 4),
        "best_setting_test_ndcg@10": _scores(tuned_test, test.qrels, ks)["ndcg@10"],
        "top5": [{**vars(s), "train_ndcg@10": round(v, 4)} for s, v in ranked[:5]],
        "train_bm25_ndcg@10": _scores(train_bm25, train.qrels, ks)["ndcg@10"],
        "train_dense_ndcg@10": _scores(train_dense, train.qrels, ks)["ndcg@10"],
    }
    # Queries with code-like tokens: does the server's dense_weight_code help or hurt them?
    coded = [q for q in train.queries if has_code(q.text)]
    plain = _server_setting(cfg)
    with_scale = fuse(train_dense, train_bm25, plain, dense_scale=_code_scale(train_texts, cfg))
    without = fuse(train_dense, train_bm25, plain)
    ids = [q.id for q in coded]
    out["tuning"]["code_queries"] = {
        "queries": len(coded), "dense_weight_code": cfg.dense_weight_code,
        "ndcg@10_with": _scores(with_scale, train.qrels, ks, ids)["ndcg@10"] if ids else None,
        "ndcg@10_without": _scores(without, train.qrels, ks, ids)["ndcg@10"] if ids else None,
    }
    log.info("scifact tuning: %s", out["tuning"])
    if server.has_reranker:
        out["rerank_tuning"] = tune_rerank_blend(server, tenant, train)
        log.info("scifact rerank tuning: %s", out["rerank_tuning"])
    return out


RERANK_WEIGHTS = (0.25, 0.5, 1.0, 2.0, 4.0, 1000.0)
RERANK_KS = (10.0, 30.0, 60.0)
RERANK_DEPTHS = (10, 15, 20, 25, 30, 40, 50)


def tune_rerank_blend(server: EvalServer, tenant: Ingested, train) -> dict:  # type: ignore[no-untyped-def]
    """``search.rerank_depth`` / ``rerank_weight`` / ``rerank_rrf_k`` on the SciFact train claims the reranker
    recipe held out of training (its dev share), offline but exact: one search reranks the deepest depth of the
    grid, its hits carry the fused score and the cross-encoder's logit of every reranked hit, and for each
    setting the head of the fused order (its first ``depth``) is re-fused here with the server's own function.
    A pair's logit does not depend on how many others are scored with it, so a shallower depth is the same
    head cut shorter. Weight 1000 is the cross-encoder's order alone."""
    from models.training.data import is_dev
    from models.training.recipe import DEV_SHARE
    from server.fusion.rrf import rerank_relevance

    dev = [q for q in train.queries if is_dev(q.id, dev_share=DEV_SHARE)]
    deepest = Stage(f"hybrid+rerank@{max(RERANK_DEPTHS)}", rerank=True, rerank_depth=max(RERANK_DEPTHS))
    hits = server.search_hits(tenant, dev, deepest, now_ms=FIXED_NOW_MS, top_k=100)
    cfg = server.config.search

    fused = {qid: sorted(hs, key=lambda h: -h.breakdown.rrf) for qid, hs in hits.items()}  # the hybrid order

    def doc_ids(ranked: Sequence[pb.Hit]) -> list[str]:
        return [d for h in ranked for d in tenant.docs_of.get(h.memory.memory_id, ())]

    def run_for(depth: int, weight: float, k: float) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for qid, order in fused.items():
            head = [h for h in order if h.breakdown.HasField("rerank")][:depth]
            rel = rerank_relevance([h.breakdown.rerank for h in head], k=k, weight=weight)
            out[qid] = doc_ids([head[i] for i in sorted(range(len(head)), key=lambda i: (-rel[i], i))]
                               + order[len(head):])
        return out

    hybrid = {qid: doc_ids(order) for qid, order in fused.items()}
    ids = [q.id for q in dev]
    grid_scores = {f"d={d},w={w:g},k={k:g}": _scores(run_for(d, w, k), train.qrels, (10,), ids)["ndcg@10"]
                   for d in RERANK_DEPTHS for w in RERANK_WEIGHTS for k in RERANK_KS}
    best = max(grid_scores, key=lambda name: grid_scores[name])
    server_depth = cfg.rerank_depth or server.default_rerank_depth
    current = f"d={server_depth},w={cfg.rerank_weight:g},k={cfg.rerank_rrf_k:g}"
    return {"split": "train claims held out of reranker training", "queries": len(dev),
            "depths": list(RERANK_DEPTHS), "hybrid_ndcg@10": _scores(hybrid, train.qrels, (10,), ids)["ndcg@10"],
            "server_setting": current, "server_setting_ndcg@10": grid_scores.get(current),
            "best": best, "grid": grid_scores}


# --------------------------------------------------------------------------------------------- LoCoMo

def run_locomo(server: EvalServer, *, variants: Sequence[str] = ("raw", "contextualised")) -> dict:
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
            items = [(t.id, pb.MemoryInput(
                content=contextualise(t) if variant == "contextualised" else t.text,
                type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=t.created_at * 1000, source_ref=t.id))
                for t in conv.turns]
            tenant = server.ingest(f"locomo-{variant}-{conv.id}", items)
            merged += tenant.merged
            queries = [Query(id=q.id, text=q.text) for q in conv.questions]
            for q in conv.questions:
                qrels[q.id] = {dia: 1 for dia in q.evidence}
                category[q.id] = q.category
            for stage in _stages(server, DECAY, DECAY_30D, DECAY_FLOOR):
                found = server.search(tenant, queries, stage, now_ms=conv.now * 1000, top_k=10)
                runs.setdefault(stage.name, {}).update(found)
        result: dict = {"merged": merged, "stages": {}}
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
    cfg = server.config.search
    tenant: Ingested = server.ingest("zh-memory", [(m.id, _memory_input(m)) for m in zh.memories])
    now_ms = (max(m.created_at_unix for m in zh.memories) + 86_400) * 1000
    ks = (5, 10)
    langs = {lang: [q for q, ql in zh.query_lang.items() if ql == lang] for lang in ("zh", "en")}
    out: dict = {"memories": len(zh.memories), "queries": len(zh.queries), "merged": tenant.merged,
                 "stages": {}}
    runs: dict[str, dict[str, list[str]]] = {}
    for stage in _stages(server, DECAY, DECAY_FLOOR):
        runs[stage.name] = server.search(tenant, zh.queries, stage, now_ms=now_ms, top_k=10)
        out["stages"][stage.name] = {"all": _scores(runs[stage.name], zh.qrels, ks),
                                     **{lang: _scores(runs[stage.name], zh.qrels, ks, ids) for lang, ids in langs.items()}}
        log.info("zh %s: %s", stage.name, out["stages"][stage.name]["all"])
    # dense_weight_cjk: tuned on the dev half (even positions), reported on the held-out half.
    order = sorted(q.id for q in zh.queries)
    dev, held = order[0::2], order[1::2]
    texts = {q.id: q.text for q in zh.queries}
    base = _server_setting(cfg)
    table = []
    for factor in (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0):
        fused = fuse(runs["dense"], runs["bm25"], base, dense_scale=_code_scale(texts, cfg, cjk=factor))
        table.append({"dense_weight_cjk": factor, "dev_ndcg@10": _scores(fused, zh.qrels, ks, dev)["ndcg@10"],
                      "held_out_ndcg@10": _scores(fused, zh.qrels, ks, held)["ndcg@10"]})
    best = max(table, key=lambda r: r["dev_ndcg@10"])
    out["cjk_weight"] = {"server_default": cfg.dense_weight_cjk, "dev_queries": len(dev),
                         "held_out_queries": len(held), "best_on_dev": best["dense_weight_cjk"],
                         "grid": table,
                         "held_out_bm25_ndcg@10": _scores(runs["bm25"], zh.qrels, ks, held)["ndcg@10"]}
    log.info("zh dense_weight_cjk: %s", out["cjk_weight"])
    return out
