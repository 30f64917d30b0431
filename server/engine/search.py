"""The query pipeline, run one batch at a time: BM25 (CPU pool) overlaps one embedding forward pass
(device thread); dense search per tenant group; RRF; one cross-encoder pass over every (query,
candidate) pair of the batch; one decay × importance kernel call over every candidate (segmented);
top_k per query. Stage functions are synchronous and run on executor threads; ``run_batch`` only
schedules them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from kernels.decay import DecayRanker
from models.base import Embedder, Reranker
from server.batching.batcher import Entry
from server.batching.query_cache import QueryEmbeddingCache
from server.config import ScoringConfig, SearchConfig
from server.domain import Breakdown, Hit, MemoryType, QueryResult, SearchQuery, Timings
from server.fusion.rrf import rerank_relevance, rrf_filtered, rrf_max
from server.lexical.analysis import has_code
from server.store.columns import columnar, keep_mask
from server.tenants.shard import TenantShard

CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass
class SearchItem:
    shard: TenantShard
    query: SearchQuery
    now_ms: int
    vector: np.ndarray | None = None           # filled by the embed stage (or the cache)
    cjk: bool = field(init=False)              # the query text has CJK script: fusion and rerank both ask

    def __post_init__(self) -> None:
        self.cjk = has_cjk(self.query.text)


@dataclass
class _Candidates:
    """One query's fused candidates, best first, with what the breakdown needs. ``ids`` are doc ids;
    ``dense_ids`` / ``lexical_ids`` are each list after filtering, best first (rank = position + 1)."""

    ids: np.ndarray = field(default_factory=lambda: _NO_IDS)
    rrf: np.ndarray = field(default_factory=lambda: _NO_SCORES)
    relevance: np.ndarray = field(default_factory=lambda: _NO_SCORES)
    rerank: np.ndarray = field(default_factory=lambda: _NO_SCORES)     # NaN: not reranked
    dense_ids: np.ndarray = field(default_factory=lambda: _NO_IDS)
    dense_scores: np.ndarray = field(default_factory=lambda: _NO_SCORES)
    lexical_ids: np.ndarray = field(default_factory=lambda: _NO_IDS)
    lexical_scores: np.ndarray = field(default_factory=lambda: _NO_SCORES)


_NO_IDS = np.zeros(0, dtype=np.int64)
_NO_SCORES = np.zeros(0, dtype=np.float64)


def has_cjk(text: str) -> bool:
    return CJK_RE.search(text) is not None


def _filtered(shard: TenantShard, query: SearchQuery, scores: np.ndarray, ids: np.ndarray, now_ms: int = 0,
              ) -> tuple[np.ndarray, np.ndarray]:
    """Drops padding, repeats, unknown (deleted) docs and filtered-out memories (a live one past its
    expiry at ``now_ms`` counts as EXPIRED); returns the kept (ids, scores) in their order, so a
    doc's rank is its position + 1. Filters on scope, key or entities read the ``Memory`` objects;
    every other filter is a mask over the store's columns."""
    ids = np.asarray(ids, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    statuses = query.effective_statuses()
    if columnar(query.filter):
        keep = keep_mask(shard.store.columns(), ids, query.filter, statuses, now_ms)
    else:
        keep = np.zeros(len(ids), dtype=np.bool_)
        by_doc, matches = shard.store.by_doc, query.filter.matches
        for i, doc in enumerate(ids.tolist()):
            memory = by_doc(doc) if doc >= 0 else None
            keep[i] = memory is not None and matches(memory, statuses=statuses, now_ms=now_ms)
    ids, scores = ids[keep], scores[keep]
    if len(ids) > 1:
        _, first = np.unique(ids, return_index=True)
        if len(first) != len(ids):
            first.sort()
            ids, scores = ids[first], scores[first]
    return ids, scores


def _ranks_of(docs: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> tuple[list[int], list[float]]:
    """Each doc's 1-based rank and score in one retriever's filtered list; (0, 0.0) where it is absent."""
    if len(docs) == 0 or len(ids) == 0:
        return [0] * len(docs), [0.0] * len(docs)
    match = docs[:, None] == ids[None, :]
    found = match.any(axis=1)
    at = match.argmax(axis=1)
    return np.where(found, at + 1, 0).tolist(), np.where(found, scores[at], 0.0).tolist()


def auto_rerank_depth(reranker: Reranker | None) -> int:
    """``search.rerank_depth`` = 0: 20 candidates where the cross-encoder runs in reduced precision
    (bfloat16 CPU, float16 CUDA, int8), 5 in float32, so CPU p95 at 10k memories stays within 250 ms."""
    if reranker is None:
        return 0
    return 5 if reranker.describe().get("dtype") == "float32" else 20


class SearchPipeline:
    def __init__(self, *, embedder: Embedder, reranker: Reranker | None, ranker: DecayRanker,
                 device_pool: Executor, cpu_pool: Executor, search: SearchConfig,
                 scoring: ScoringConfig, cache: QueryEmbeddingCache | None = None) -> None:
        self.embedder = embedder
        self.reranker = reranker
        self.ranker = ranker
        self.device_pool = device_pool
        self.cpu_pool = cpu_pool
        self.cfg = search
        self.scoring = scoring
        self.cache = cache
        self.default_rerank_depth = search.rerank_depth or auto_rerank_depth(reranker)

    def depth(self, query: SearchQuery) -> int:
        base = query.candidates or self.cfg.candidates
        # A filter that is not the default drops candidates after retrieval: look deeper.
        return base * 4 if (query.filter.statuses or query.filter.types or query.filter.scope is not None
                            or query.filter.key is not None or query.filter.entities_any
                            or query.filter.entities_all) else base

    def rerank_depth(self, it: SearchItem) -> int:
        query = it.query
        if self.reranker is None or query.rerank_depth < 0:
            return 0
        if query.rerank_depth:
            return query.rerank_depth
        return 0 if not self.cfg.rerank_cjk and it.cjk else self.default_rerank_depth

    # -- the batch ----------------------------------------------------------------------------------
    async def run_batch(self, batch: list[Entry[SearchItem]], device_done: Callable[[], None]) -> None:
        """CPU work (tokenization, BM25, fusion, ranking) runs on the CPU pool; only model forward passes
        hold the device thread, so the next batch's CPU stages overlap this batch's device work.
        ``device_done`` is called once the embedding pass is over: the batcher may then form the next
        batch (a reranking pass later queues on the device thread behind its embedding)."""
        loop = asyncio.get_running_loop()
        items = [entry.payload for entry in batch]
        timings = Timings(batch_size=len(batch))
        lexical = loop.run_in_executor(self.cpu_pool, self._lexical_stage, items)
        try:
            need = [it for it in items if it.vector is None and not it.query.lexical_only]
            if need:
                t0 = time.monotonic_ns()
                # Short queries tokenize in well under a millisecond: on the device thread itself, so the
                # forward pass never queues behind this or the next batch's BM25 in the CPU pool.
                vectors = await loop.run_in_executor(self.device_pool, self._embed, [it.query.text for it in need])
                timings.embed_ns = time.monotonic_ns() - t0
                for it, vec in zip(need, vectors, strict=True):
                    it.vector = vec
                    if self.cache is not None:
                        self.cache.put(it.shard.tenant_id, it.query.text, vec)
            device_done()
            t0 = time.monotonic_ns()
            dense = await loop.run_in_executor(self.cpu_pool, self._dense_stage, items)
            timings.ann_ns = time.monotonic_ns() - t0
        finally:
            lexical_results, timings.bm25_ns = await lexical
        t0 = time.monotonic_ns()
        cands = await loop.run_in_executor(self.cpu_pool, self._fuse_all, items, dense, lexical_results)
        timings.fusion_ns = time.monotonic_ns() - t0
        pairs, owners = self._rerank_pairs(items, cands)
        if pairs:
            assert self.reranker is not None
            t0 = time.monotonic_ns()
            pair_tokens = await loop.run_in_executor(self.cpu_pool, self.reranker.tokenize, pairs)
            logits = await loop.run_in_executor(self.device_pool, self.reranker.forward, pair_tokens)
            timings.rerank_ns = time.monotonic_ns() - t0
            self._apply_rerank(items, cands, owners, logits)
        results = await loop.run_in_executor(self.cpu_pool, self._rank_stage, items, cands, timings)
        for entry, result in zip(batch, results, strict=True):
            own = Timings(**{f: getattr(result.timings, f) for f in Timings.__slots__})  # type: ignore[attr-defined]
            own.queue_ns = entry.started_ns - entry.enqueued_ns
            own.total_ns = time.monotonic_ns() - entry.enqueued_ns
            entry.resolve(QueryResult(hits=result.hits, timings=own, context_block=result.context_block))

    # -- stages (executor threads) -------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.forward(self.embedder.tokenize(texts))

    def _lexical_stage(self, items: Sequence[SearchItem]) -> tuple[list[tuple[np.ndarray, np.ndarray] | None], int]:
        """BM25 per tenant group: one consistent snapshot and one call per tenant."""
        t0 = time.monotonic_ns()
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(items)
        groups: dict[int, list[int]] = {}
        for i, it in enumerate(items):
            if not it.query.dense_only:
                groups.setdefault(id(it.shard), []).append(i)
        for members in groups.values():
            shard = items[members[0]].shard
            depths = [self.depth(items[i].query) for i in members]
            found = shard.lexical.search_many([items[i].query.text for i in members], max(depths))
            for i, depth, (scores, ids) in zip(members, depths, found, strict=True):
                out[i] = (scores[:depth], ids[:depth])
        return out, time.monotonic_ns() - t0

    def _dense_stage(self, items: Sequence[SearchItem]) -> list[tuple[np.ndarray, np.ndarray] | None]:
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(items)
        groups: dict[int, list[int]] = {}
        for i, it in enumerate(items):
            if it.vector is not None and not it.query.lexical_only:
                groups.setdefault(id(it.shard), []).append(i)
        for members in groups.values():
            shard = items[members[0]].shard
            k = max(self.depth(items[i].query) for i in members)
            scores, ids = shard.dense.search(np.stack([items[i].vector for i in members]), k)  # type: ignore[misc]
            for row, i in enumerate(members):
                depth = self.depth(items[i].query)
                out[i] = (scores[row, :depth], ids[row, :depth])
        return out

    def _weights(self, it: SearchItem) -> tuple[float, float]:
        query = it.query
        if query.lexical_only:
            return 0.0, 1.0
        if query.dense_only:
            return 1.0, 0.0
        dense_w = self.cfg.dense_weight
        if it.cjk:
            dense_w *= self.cfg.dense_weight_cjk   # the packaged embedder is English-only
        if has_code(query.text):
            dense_w *= self.cfg.dense_weight_code  # embedders blur codes: XJ-2025-0421 ≈ XJ-2026-0421
        return dense_w, self.cfg.lexical_weight

    def _fuse(self, it: SearchItem, dense: tuple[np.ndarray, np.ndarray] | None,
              lexical: tuple[np.ndarray, np.ndarray] | None) -> _Candidates:
        cand = _Candidates()
        if dense is not None:
            cand.dense_ids, cand.dense_scores = _filtered(it.shard, it.query, *dense, it.now_ms)
        if lexical is not None:
            cand.lexical_ids, cand.lexical_scores = _filtered(it.shard, it.query, *lexical, it.now_ms)
        weights = self._weights(it)
        scores, ids = rrf_filtered([cand.dense_ids, cand.lexical_ids], k=self.cfg.rrf_k, weights=weights)
        cand.ids, cand.rrf = ids, scores
        cand.relevance = scores / rrf_max(k=self.cfg.rrf_k, weights=weights)
        cand.rerank = np.full(len(ids), np.nan)
        return cand

    def _fuse_all(self, items: Sequence[SearchItem], dense: list, lexical: list) -> list[_Candidates]:
        return [self._fuse(it, d, lx) for it, d, lx in zip(items, dense, lexical, strict=True)]

    def _rerank_pairs(self, items: Sequence[SearchItem], cands: list[_Candidates],
                      ) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
        """Every (query, candidate) pair of the batch within each query's rerank depth."""
        pairs: list[tuple[str, str]] = []
        owners: list[tuple[int, int]] = []
        if self.reranker is None:
            return pairs, owners
        for qi, (it, cand) in enumerate(zip(items, cands, strict=True)):
            by_doc = it.shard.store.by_doc
            for ci, doc in enumerate(cand.ids[: self.rerank_depth(it)].tolist()):
                memory = by_doc(doc)
                if memory is not None:  # gone since fusion (a purge): it keeps its fused place
                    pairs.append((it.query.text, memory.content))
                    owners.append((qi, ci))
        return pairs, owners

    def _apply_rerank(self, items: Sequence[SearchItem], cands: list[_Candidates], owners: list[tuple[int, int]],
                      logits: np.ndarray) -> None:
        for (qi, ci), logit in zip(owners, logits.tolist(), strict=True):
            cands[qi].rerank[ci] = float(logit)
        for it, cand in zip(items, cands, strict=True):
            depth = min(self.rerank_depth(it), len(cand.ids))
            if depth == 0:
                continue
            head = np.nan_to_num(cand.rerank[:depth], nan=0.0).tolist()
            rel = np.asarray(rerank_relevance(head, k=self.cfg.rerank_rrf_k, weight=self.cfg.rerank_weight))
            # Candidates past the rerank depth stay below every reranked one, in fused order.
            tail = rel.min() * 0.5 * cand.rrf[depth:] / cand.rrf[depth - 1]
            cand.relevance = np.concatenate([rel, tail])

    def _half_lives(self, query: SearchQuery) -> dict[MemoryType, float]:
        s, cfg = query.scoring, self.scoring
        if s.disable_decay:
            return {t: 0.0 for t in MemoryType}
        return {
            MemoryType.EPISODIC: cfg.episodic_half_life_s if s.episodic_half_life_s is None else s.episodic_half_life_s,
            MemoryType.SEMANTIC: cfg.semantic_half_life_s if s.semantic_half_life_s is None else s.semantic_half_life_s,
            MemoryType.PROCEDURAL: (cfg.procedural_half_life_s if s.procedural_half_life_s is None
                                    else s.procedural_half_life_s),
        }

    def _importance_weight(self, query: SearchQuery) -> float:
        if query.scoring.disable_importance:
            return 0.0
        w = query.scoring.importance_weight
        return self.scoring.importance_weight if w is None else w

    def _decay_floor(self, query: SearchQuery) -> float:
        floor = query.scoring.decay_floor
        return self.scoring.decay_floor if floor is None else floor

    def _rank_stage(self, items: Sequence[SearchItem], cands: list[_Candidates],
                    timings: Timings) -> list[QueryResult]:
        """One decay × importance kernel call over every candidate of the batch (segmented)."""
        t0 = time.monotonic_ns()
        relevance: list[np.ndarray] = []
        age_s: list[np.ndarray] = []
        half_life: list[np.ndarray] = []
        weight_in: list[np.ndarray] = []
        pinned: list[np.ndarray] = []
        floors: list[np.ndarray] = []
        offsets = [0]
        for it, cand in zip(items, cands, strict=True):
            cols = it.shard.store.columns()
            rows = cand.ids  # every fused doc passed the filter, so it has a row in this (later, never shorter) view
            lives = self._half_lives(it.query)
            by_type = np.zeros(len(MemoryType) + 1, dtype=np.float64)
            for t, life in lives.items():
                by_type[int(t)] = life
            w = self._importance_weight(it.query)
            relevance.append(cand.relevance)
            age_s.append(np.maximum(0.0, (it.now_ms - cols.last_access_ms[rows]) / 1000.0))
            half_life.append(by_type[cols.type[rows]])
            # Per-query importance weights ride in one launch: pass the finished weight, w = 1.
            weight_in.append((1.0 - w) + w * cols.importance[rows])
            pinned.append(cols.pinned[rows])
            floors.append(np.full(len(rows), self._decay_floor(it.query)))
            offsets.append(offsets[-1] + len(rows))
        top_k = max((it.query.top_k or self.cfg.default_top_k) for it in items)

        def joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)

        ranked = self.ranker(joined(relevance, np.float32), joined(age_s, np.float32), joined(half_life, np.float32),
                             joined(weight_in, np.float32), joined(pinned, np.bool_),
                             np.asarray(offsets, dtype=np.int64), top_k=top_k, importance_weight=1.0,
                             decay_floor=joined(floors, np.float32))
        timings.decay_ns = time.monotonic_ns() - t0
        results: list[QueryResult] = []
        for qi, (it, cand) in enumerate(zip(items, cands, strict=True)):
            top = ranked.indices[qi, : it.query.top_k or self.cfg.default_top_k]
            top = top[top >= 0]
            cis = top - offsets[qi]
            docs = cand.ids[cis]
            d_ranks, d_scores = _ranks_of(docs, cand.dense_ids, cand.dense_scores)
            l_ranks, l_scores = _ranks_of(docs, cand.lexical_ids, cand.lexical_scores)
            by_doc = it.shard.store.by_doc
            hits: list[Hit] = []
            for j, (gi, ci, doc) in enumerate(zip(top.tolist(), cis.tolist(), docs.tolist(), strict=True)):
                memory = by_doc(doc)
                if memory is None:  # purged since fusion
                    continue
                rerank = float(cand.rerank[ci])
                hits.append(Hit(memory=memory, breakdown=Breakdown(
                    dense_rank=d_ranks[j], dense_score=d_scores[j], bm25_rank=l_ranks[j], bm25_score=l_scores[j],
                    rrf=float(cand.rrf[ci]), rerank=None if np.isnan(rerank) else rerank,
                    relevance=float(cand.relevance[ci]), decay=float(ranked.decay[gi]),
                    importance_weight=float(ranked.weight[gi]), final=float(ranked.final[gi]))))
            results.append(QueryResult(hits=tuple(hits), timings=timings))
        return results
