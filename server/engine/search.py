"""The query pipeline, run one batch at a time: BM25 (CPU pool) overlaps one embedding forward pass
(device thread); dense search per tenant group; RRF; one cross-encoder pass over every (query,
candidate) pair of the batch; one decay × importance kernel call over every candidate (segmented);
top_k per query. A batcher :class:`~server.batching.batcher.Stage`: ``device`` (BM25 and the embedding pass)
then ``finish`` (everything else). Stage functions are synchronous and run on executor threads; the async
steps only schedule them.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import math
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace

import numpy as np

from kernels.decay import DecayRanker
from models.base import Embedder, Reranker
from server.batching.batcher import Entry, Stage
from server.batching.controller import RerankController
from server.batching.pair_cache import PairScoreCache
from server.batching.query_cache import QueryEmbeddingCache
from server.config import ScoringConfig, SearchConfig
from server.domain import Memory, MemoryType, QueryResult, SearchQuery, Timings
from server.engine.candidates import Candidates, SearchItem
from server.engine.centring import Centring, read_anchors
from server.engine.expand import adjacent_turns, second_hop, seeds_of
from server.engine.feedback import FEEDBACK_BELOW, FEEDBACK_WEIGHT, is_weak, rocchio
from server.engine.passages import DENSE_FOCUS, PASSAGE_CHARS, dense_focus, rerank_texts
from server.engine.query_adapter import QueryAdapter
from server.engine.query_tower import QueryTower
from server.engine.ranking import RankStage
from server.engine.rerank import PairScorer
from server.engine.speakers import (NAMES_KEPT, QUESTION_FACTOR, SPEAKER_FACTOR, SPEAKER_LIST, SPEAKER_LIST_DEPTH,
                                    listed_speaker, names_in, question_relevance, speaker_relevance, unnamed)
from server.engine.updates import split_speaker
from server.fusion.calibration import Calibration, fused_features
from server.fusion.rrf import rrf_filtered, rrf_max
from server.index.memory_vectors import passage_ids
from server.store.columns import columnar, keep_mask
from server.tenants.shard import TenantShard
from server.text import has_code, indexed_text
from server.tracing import carrying

__all__ = ["SearchItem", "SearchPipeline", "auto_rerank_depth"]


@dataclass
class _InFlight:
    """A batch between its device step and its finish: the embedded items and the BM25 still running."""

    started_ns: int
    items: list[SearchItem]
    timings: Timings
    lexical: asyncio.Future[tuple[list[tuple[np.ndarray, np.ndarray] | None], int]] = field(init=False)


SPEAKER_SCAN = 100      # a query's first candidates whose speakers decide the speaker it names (its own list)
FEEDBACK_DOCS = 3      # feedback docs of a query that asks for the second round while search.feedback_docs is 0
# Fusion: RRF over the dense and BM25 lists, k and the dense list's weight chosen on SciFact train (MiniLM in earlier
# sessions; with e5 the same grid still puts them first on train, nDCG@10 0.7218; README "Retrieval quality").
RRF_K = 10.0
DENSE_WEIGHT = 0.85
LEXICAL_WEIGHT = 1.0
# The dense weight × DENSE_WEIGHT_CJK for a query in a CJK script: with the query centred (server/engine/centring.py)
# e5's list ranks memories of both languages and Chinese BM25 reads none in English, so RRF follows the dense order
# (BM25 still enters the calibration's bm25 feature): the smallest weight of the best plateau of 1–1000 on the zh/en
# dev half through the server at the defaults (dev nDCG@10 0.763 at 50 and 100, 0.750 at 20, 0.729 at 3, the weight
# before centring; README "Quality"), and × DENSE_WEIGHT_CODE for a query naming a code (XJ-2026-0421): embedders
# blur codes, BM25's code field matches them whole.
DENSE_WEIGHT_CJK = 50.0
DENSE_WEIGHT_CODE = 0.3


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


def auto_rerank_depth(reranker: Reranker | None) -> int:
    """``search.rerank_depth`` = 0: 20 candidates where the cross-encoder runs in reduced precision
    (bfloat16 CPU, float16 CUDA, int8), 5 in float32, so CPU p95 at 10k memories stays within 250 ms."""
    if reranker is None:
        return 0
    return 5 if reranker.describe().get("dtype") == "float32" else 20


class SearchPipeline(Stage[SearchItem, _InFlight]):
    def __init__(self, *, embedder: Embedder, reranker: Reranker | None, ranker: DecayRanker,
                 device_pool: Executor, cpu_pool: Executor, search: SearchConfig,
                 scoring: ScoringConfig, calibration: Calibration, cache: QueryEmbeddingCache | None = None,
                 controller: RerankController | None = None, pair_cache: PairScoreCache | None = None,
                 thread_window_s: float = 1800.0, turn_tokens: int = 0, turn_passages: int = 0,
                 query_adapter: QueryAdapter | QueryTower | None = None) -> None:
        self.embedder = embedder
        # A long chat turn's cross-encoder window where its passage vector closest to the query lies (passages.py
        # DENSE_FOCUS, off: measured, not the default), read with the write stage's layout of a turn's windows.
        self.focus_ready = turn_tokens > 0 and turn_passages > 0 and hasattr(embedder, "passage_spans")
        self.dense_focus = DENSE_FOCUS and self.focus_ready
        self._turn_spans = functools.lru_cache(maxsize=4096)(
            lambda text: tuple(embedder.passage_spans(text, limit=turn_passages, width=turn_tokens)))
        self.reranker = reranker
        self.device_pool = device_pool
        self.cpu_pool = cpu_pool
        self.cfg = search
        self.feedback_below, self.feedback_weight = FEEDBACK_BELOW, FEEDBACK_WEIGHT   # the second round's rule
        # The second hop (server/engine/expand.py): turns beside the most relevant candidates, within a conversation.
        self.expand_turns, self.expand_window_ms = search.expand_turns, int(thread_window_s * 1000)
        self.speaker_factor = SPEAKER_FACTOR   # the speaker a question names (server/engine/speakers.py); 1: off
        self.speaker_list = SPEAKER_LIST   # ... and that speaker's own dense list (speakers.py); False: off
        # The speakers each tenant's questions named lately (speakers.NAMES_KEPT), newest last: their unnamed texts are
        # embedded with a question that names them again. Read and written on the event loop.
        self._named: weakref.WeakKeyDictionary[TenantShard, collections.OrderedDict[str, None]] = (
            weakref.WeakKeyDictionary())
        self.question_factor = QUESTION_FACTOR   # a named speaker's turn that ends by asking (speakers.py); 1: off
        self.cache = cache
        self.calibration = calibration
        self.rank = RankStage(ranker=ranker, scoring=scoring)
        self.default_rerank_depth = search.rerank_depth or auto_rerank_depth(reranker)
        self.controller = controller
        self.scorer = PairScorer(reranker=reranker, device_pool=device_pool, cpu_pool=cpu_pool,
                                 cache=pair_cache) if reranker else None
        self.centring: Centring | None = None   # centre_cjk: measured on the first CJK query (device thread)
        self.query_adapter = query_adapter   # the dense search's map of a query's vector (query_adapter.py); None: off
        self.dense_weight = DENSE_WEIGHT   # the dense list's weight in RRF (an English query without codes)

    def measure_rerank_cost(self) -> None:
        """Seeds the controller's cost models with a pass at the full depth, with the device thread's threads
        and, where set, the idle ones (blocks on the device thread; at start). Before, a server whose idle
        passes all ran wide met its first load with the narrow model unmeasured, read its prior (1 ms a
        pair, a sixth of a 2-core CPU's), reranked 12 candidates for a batch of 12 at 32 clients and held the
        device ~0.8 s: p95 336 ms against 229 without the reranker."""
        if self.controller is None or self.scorer is None or self.default_rerank_depth <= 0:
            return
        scorer, depth, wide = self.scorer, self.default_rerank_depth, self.controller.idle_threads
        for threads in (0, wide) if wide else (0,):
            self.device_pool.submit(scorer.sample_ms, 2, threads).result()   # first calls allocate
            ms, tokens = self.device_pool.submit(scorer.sample_ms, depth, threads).result()
            self.controller.observe(queries=0, other_ms=0.0, pairs=depth, tokens=tokens, rerank_ms=ms, threads=threads)

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
        if not self.cfg.rerank_cjk and it.cjk:
            return 0
        return self.default_rerank_depth if it.depth_cap is None else min(it.depth_cap, self.default_rerank_depth)

    def shape(self, batch: list[Entry[SearchItem]], queued: list[Entry[SearchItem]], now_ns: int, *,
              others: int = 0) -> None:
        """As a batch forms: the controller's rerank budget for its default-depth queries (an explicit per-request
        depth is honoured as asked; the depth is fitted to the budget once the candidates are known,
        :meth:`_fit_depth`), and its rerank pass's threads (the idle cores when it runs alone)."""
        if self.controller is None:
            return
        alone = not queued and others == 0
        threads = self.controller.threads(alone=alone)
        default = [e.payload for e in batch if self.reranker is not None and e.payload.query.rerank_depth == 0
                   and (self.cfg.rerank_cjk or not e.payload.cjk)]
        budget_ms = self.controller.budget(batch, queued, reranked=len(default), now_ns=now_ns, alone=alone)
        for it in default:
            it.rerank_budget_ms = None if math.isinf(budget_ms) else budget_ms
        for entry in batch:
            entry.payload.rerank_threads = threads

    # -- the batch ----------------------------------------------------------------------------------
    async def device(self, batch: list[Entry[SearchItem]]) -> _InFlight:
        """The device step: BM25 starts on the CPU pool and overlaps the one embedding forward pass (the
        device thread). Model forward passes alone hold the device, so the next batch's device step
        overlaps this batch's CPU stages (:meth:`finish`); a reranking pass later queues on the device
        thread behind the next batch's embedding."""
        loop = asyncio.get_running_loop()
        if self.cfg.centre_cjk and self.centring is None and any(e.payload.cjk and not e.payload.query.lexical_only
                                                                 for e in batch):
            # Once, on the first CJK query, before the batch's clock starts: the rerank-depth controller's cost
            # model never counts the anchors' embedding as a query's work.
            self.centring = await loop.run_in_executor(self.device_pool, Centring.measure, self._embed, read_anchors())
        traced = any(entry.payload.traced for entry in batch)   # stage marks for the spans (server/tracing.py)
        run = _InFlight(started_ns=time.monotonic_ns(), items=[entry.payload for entry in batch],
                        timings=Timings(batch_size=len(batch), marks=[] if traced else None))
        run.lexical = loop.run_in_executor(self.cpu_pool, self._lexical_stage, run.items, run.timings)
        try:
            need = [it for it in run.items if it.vector is None and not it.query.lexical_only]
            if need:
                t0 = time.monotonic_ns()
                # Short queries tokenize in well under a millisecond: on the device thread itself, so the
                # forward pass never queues behind this or the next batch's BM25 in the CPU pool.
                traces = [it.trace for it in need if it.trace]   # what a Ray hop passes on (server/tracing.py)
                extra = [(it, name) for it in need for name in self._names_to_prefetch(it)]
                vectors = await loop.run_in_executor(self.device_pool, carrying, traces, self._embed,
                                                     [it.query.text for it in need]
                                                     + [unnamed(it.query.text, name) for it, name in extra])
                run.timings.embed_ns = run.timings.lap("embed", t0)
                for it, vec in zip(need, vectors[:len(need)], strict=True):
                    it.vector = vec
                    if self.cache is not None:
                        self.cache.put(it.shard.tenant_id, it.query.text, vec)
                for (it, name), vec in zip(extra, vectors[len(need):], strict=True):
                    it.unnamed = {**(it.unnamed or {}), name: vec}
        except BaseException:
            await asyncio.gather(run.lexical, return_exceptions=True)   # never leave BM25 running unowned
            raise
        return run

    async def finish(self, batch: list[Entry[SearchItem]], run: _InFlight) -> None:
        """The CPU stages (dense search, fusion, the second round, reranking, ranking) and the answers."""
        loop = asyncio.get_running_loop()
        items, timings, started_ns = run.items, run.timings, run.started_ns
        try:
            t0 = time.monotonic_ns()
            dense = await loop.run_in_executor(self.cpu_pool, self._dense_stage, items)
            timings.ann_ns = timings.lap("ann", t0)
        finally:
            lexical_results, timings.bm25_ns = await run.lexical
        t0 = time.monotonic_ns()
        cands = await loop.run_in_executor(self.cpu_pool, self._fuse_all, items, dense, lexical_results)
        timings.fusion_ns = timings.lap("fusion", t0)
        weak = [i for i, (it, c) in enumerate(zip(items, cands, strict=True)) if self._wants_feedback(it, c)]
        if weak:
            t0 = time.monotonic_ns()
            cands = await loop.run_in_executor(self.cpu_pool, self._feedback_stage, items, cands, weak, dense,
                                               lexical_results)
            timings.ann_ns += timings.lap("feedback", t0)   # the second dense round (and its fusion)
        named = [(i, name) for i, (it, c) in enumerate(zip(items, cands, strict=True))
                 if i not in weak and (name := self._listed_speaker(it, c))]
        if named:   # the named speaker's own dense list (server/engine/speakers.py SPEAKER_LIST): one more pass
            t0 = time.monotonic_ns()   # ... unless the question's own pass embedded its unnamed text too
            for i, name in named:
                self._remember(items[i].shard, name)
            todo = [(i, name) for i, name in named if name not in (items[i].unnamed or {})]
            fresh = iter(await loop.run_in_executor(self.device_pool, self._embed,
                                                    [unnamed(items[i].query.text, name) for i, name in todo])
                         if todo else ())
            vectors = [(items[i].unnamed or {}).get(name) for i, name in named]
            vectors = [next(fresh) if v is None else v for v in vectors]
            cands = await loop.run_in_executor(self.cpu_pool, self._speaker_stage, items, cands, named, vectors,
                                               dense, lexical_results)
            timings.ann_ns += timings.lap("speaker", t0)
        await self._fit_depth(items, cands)
        pairs, owners = self._rerank_pairs(items, cands)
        computed, compute_ns, tokens, threads = 0, 0, 0, 0
        if pairs:
            assert self.scorer is not None
            t0 = time.monotonic_ns()
            threads = max(it.rerank_threads for it in items)
            traces = [items[qi].trace for qi in sorted({qi for qi, _ in owners}) if items[qi].trace]
            scored = await self.scorer.score(pairs, [items[qi].shard.tenant_id for qi, _ in owners], threads=threads,
                                             traces=traces)
            timings.rerank_ns = timings.lap("rerank", t0)
            computed, compute_ns, tokens = scored.computed, scored.compute_ns, scored.tokens
            self._apply_rerank(items, cands, owners, scored.logits)
        if self.expand_turns or self.speaker_factor != 1.0 or self.question_factor != 1.0:
            t0 = time.monotonic_ns()
            cands = await loop.run_in_executor(self.cpu_pool, self._expand_stage, items, cands)
            timings.fusion_ns += timings.lap("expand", t0)   # the second hop and the speaker join the fusion's time
        results = await loop.run_in_executor(self.cpu_pool, self.rank, items, cands, timings)
        if self.controller is not None:   # the cost model: ms per pair, and per query for the other stages
            self.controller.observe(queries=len(batch), other_ms=(time.monotonic_ns() - started_ns - timings.rerank_ns) / 1e6,
                                    pairs=computed, tokens=tokens, rerank_ms=compute_ns / 1e6, threads=threads)
        for entry, it, result in zip(batch, items, results, strict=True):
            own = Timings(**{f: getattr(result.timings, f) for f in Timings.__slots__})  # type: ignore[attr-defined]
            own.rerank_depth_used = self.rerank_depth(it)
            own.queue_ns = entry.started_ns - entry.enqueued_ns
            own.total_ns = time.monotonic_ns() - entry.enqueued_ns
            if timings.marks is not None:   # this request's own wait, then the batch's stages
                own.marks = [("queue", entry.enqueued_ns, entry.started_ns), *timings.marks]
            entry.resolve(QueryResult(hits=result.hits, timings=own, context_block=result.context_block))

    # -- stages (executor threads) -------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> np.ndarray:
        prefix = getattr(self.embedder, "query_prefix", "")   # asymmetric models (e5): "query: "
        return self.embedder.forward(self.embedder.tokenize([prefix + t for t in texts] if prefix else texts))

    def _centred(self, it: SearchItem) -> Centring | None:
        """The centring a query's dense search takes: CJK queries' (server/engine/centring.py), else none."""
        return self.centring if it.cjk and self.cfg.centre_cjk else None

    def _lexical_stage(self, items: Sequence[SearchItem], timings: Timings,
                       ) -> tuple[list[tuple[np.ndarray, np.ndarray] | None], int]:
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
        return out, timings.lap("bm25", t0)

    def _dense_stage(self, items: Sequence[SearchItem]) -> list[tuple[np.ndarray, np.ndarray] | None]:
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(items)
        groups: dict[int, list[int]] = {}
        for i, it in enumerate(items):
            if it.vector is not None and not it.query.lexical_only:
                groups.setdefault(id(it.shard), []).append(i)
        for members in groups.values():
            shard = items[members[0]].shard
            k = max(self.depth(items[i].query) for i in members)
            centring = [self._centred(items[i]) for i in members]
            vectors = [items[i].vector if c is None else c.search_vector(items[i].vector)  # type: ignore[arg-type]
                       for i, c in zip(members, centring, strict=True)]
            adapter = self.query_adapter
            mapped = [adapter is not None and c is None for c in centring]
            if adapter is not None:
                vectors = adapter.map_all([items[i].query.text for i in members], vectors, mapped)
            scores, ids = shard.dense.search(np.stack(vectors), k)  # type: ignore[misc]
            for row, i in enumerate(members):
                if mapped[row]:   # the mapped vector chose the memories; each keeps its cosine with the query
                    found = ids[row] >= 0
                    vector = np.asarray(items[i].vector, dtype=np.float32)
                    scores[row, found] = shard.dense.scores_of(vector, ids[row, found])
                    ids[row, np.isneginf(scores[row])] = -1   # removed since the search: padding, dropped later
            for row, (i, c) in enumerate(zip(members, centring, strict=True)):
                depth = self.depth(items[i].query)
                out[i] = (scores[row, :depth] if c is None else c.scores(scores[row, :depth]), ids[row, :depth])
        return out

    def _weights(self, it: SearchItem) -> tuple[float, float]:
        query = it.query
        if query.lexical_only:
            return 0.0, 1.0
        if query.dense_only:
            return 1.0, 0.0
        dense_w = self.dense_weight
        if it.cjk:
            dense_w *= DENSE_WEIGHT_CJK
        if has_code(query.text):
            dense_w *= DENSE_WEIGHT_CODE  # embedders blur codes: XJ-2025-0421 ≈ XJ-2026-0421
        return dense_w, LEXICAL_WEIGHT

    def _fuse(self, it: SearchItem, dense: tuple[np.ndarray, np.ndarray] | None,
              lexical: tuple[np.ndarray, np.ndarray] | None,
              feedback: tuple[np.ndarray, np.ndarray] | None = None) -> Candidates:
        cand = Candidates()
        if dense is not None:
            cand.dense_ids, cand.dense_scores = _filtered(it.shard, it.query, *dense, it.now_ms)
        if lexical is not None:
            cand.lexical_ids, cand.lexical_scores = _filtered(it.shard, it.query, *lexical, it.now_ms)
        weights = self._weights(it)
        lists = [cand.dense_ids, cand.lexical_ids]
        if feedback is not None:   # the second round's dense list (server/engine/feedback.py)
            cand.feedback_ids = _filtered(it.shard, it.query, *feedback, it.now_ms)[0]
            lists.append(cand.feedback_ids)
            weights = (*weights, weights[0])
        scores, ids = rrf_filtered(lists, k=RRF_K, weights=weights)
        cand.ids, cand.rrf = ids, scores
        cand.rrf_norm = scores / rrf_max(k=RRF_K, weights=weights)
        cand.features = fused_features(ids, cand.rrf_norm, cand.dense_ids, cand.dense_scores, cand.lexical_ids,
                                       cand.lexical_scores)
        cand.relevance = self.calibration.fused(cand.features)
        cand.rerank = np.full(len(ids), np.nan)
        return cand

    def _fuse_all(self, items: Sequence[SearchItem], dense: list, lexical: list) -> list[Candidates]:
        return [self._fuse(it, d, lx) for it, d, lx in zip(items, dense, lexical, strict=True)]

    def _wants_feedback(self, it: SearchItem, cand: Candidates) -> bool:
        """The second round runs for a query with a vector and candidates when it asks for it
        (``SearchQuery.feedback``), or by the server's rule: feedback on and a weak first round."""
        if it.vector is None or it.query.lexical_only or it.query.dense_only or len(cand.ids) == 0:
            return False
        if it.query.feedback is not None:
            return it.query.feedback
        return self.cfg.feedback_docs > 0 and is_weak(cand.relevance, below=self.feedback_below)

    def _feedback_stage(self, items: Sequence[SearchItem], cands: list[Candidates], weak: Sequence[int],
                        dense: list, lexical: list) -> list[Candidates]:
        """The second round for each weak query with a vector: a Rocchio step toward its top fused candidates,
        one more dense search per tenant group, and a fusion of the three lists."""
        moved: dict[int, SearchItem] = {}
        for i in weak:   # the queries _wants_feedback chose
            it, cand = items[i], cands[i]
            try:
                top = it.shard.dense.reconstruct_batch(cand.ids[: self.cfg.feedback_docs or FEEDBACK_DOCS])
            except (KeyError, RuntimeError):   # a candidate deleted since fusion: keep the first round
                continue
            moved[i] = replace(it, vector=rocchio(it.vector, top, weight=self.feedback_weight))
        if not moved:
            return cands
        second = self._dense_stage(list(moved.values()))
        out = list(cands)
        for i, found in zip(moved, second, strict=True):
            out[i] = self._fuse(items[i], dense[i], lexical[i], feedback=found)
        return out

    def _listed_speaker(self, it: SearchItem, cand: Candidates) -> str:
        """The speaker a reranked query names whose own turns get a dense list (speakers.listed_speaker), else
        ""."""
        if it.vector is None or len(cand.ids) == 0 or not self._may_list(it):
            return ""
        by_doc = it.shard.store.by_doc
        return listed_speaker(it.query.text, [by_doc(d) for d in cand.ids[:SPEAKER_SCAN].tolist()])

    def _names_to_prefetch(self, it: SearchItem) -> list[str]:
        """The speakers whose unnamed text embeds with ``it``'s own: those its tenant's questions named lately that it
        names too, when its candidates may list one (:meth:`_listed_speaker`'s own conditions)."""
        known = self._named.get(it.shard)
        return names_in(it.query.text, reversed(known)) if known and self._may_list(it) else []

    def _may_list(self, it: SearchItem) -> bool:
        """Whether ``it`` may get a named speaker's list at all: the list on, a hybrid query, reranked."""
        return (self.speaker_list and not it.query.lexical_only and not it.query.dense_only
                and self.rerank_depth(it) > 0)

    def _remember(self, shard: TenantShard, name: str) -> None:
        known = self._named.setdefault(shard, collections.OrderedDict())
        known[name] = None
        known.move_to_end(name)
        while len(known) > NAMES_KEPT:
            known.popitem(last=False)

    def _speaker_stage(self, items: Sequence[SearchItem], cands: list[Candidates], named: Sequence[tuple[int, str]],
                       vectors: Sequence[np.ndarray], dense: list, lexical: list) -> list[Candidates]:
        """For each query that names one speaker: the tenant's dense hits for its unnamed text kept to that
        speaker's turns, as deep as its dense list, fused as a third list (the dense weight) beside its own two."""
        out = list(cands)
        for (i, name), vector in zip(named, vectors, strict=True):
            it = items[i]
            scores, ids = it.shard.dense.search(np.asarray(vector, dtype=np.float32)[None, :], SPEAKER_LIST_DEPTH)
            by_doc = it.shard.store.by_doc
            keep = [j for j, d in enumerate(ids[0].tolist()) if d >= 0 and (m := by_doc(int(d))) is not None
                    and m.type == MemoryType.EPISODIC and split_speaker(m.content)[0] == name][:self.depth(it.query)]
            if keep:
                out[i] = self._fuse(it, dense[i], lexical[i], feedback=(scores[0][keep], ids[0][keep]))
        return out

    def _candidate_pairs(self, it: SearchItem, cand: Candidates, head: int) -> list[tuple[int, tuple[str, str]]]:
        """(candidate index, (query, text the cross-encoder reads)) of a query's first ``head`` candidates; a long
        chat turn has one pair per window read (server/engine/passages.py ``rerank_texts``), its logit their best,
        the first of them where its passage vector closest to the query lies (:meth:`_focus`)."""
        by_doc = it.shard.store.by_doc
        out = []
        for ci, doc in enumerate(cand.ids[:head].tolist()):
            memory = by_doc(doc)
            if memory is not None:  # gone since fusion (a purge): it keeps its fused place
                focus = self._focus(it, doc, memory)
                out.extend((ci, (it.query.text, text)) for text in rerank_texts(it.query.text, memory, focus=focus))
        return out

    def _focus(self, it: SearchItem, doc: int, memory: Memory) -> tuple[int, int] | None:
        """The span of a long chat turn's content that its passage vector closest to the query reads, else None (a
        short memory, not a turn, a query without a vector, a turn without passage vectors, or windows that no longer
        pair up with them: written under another layout)."""
        if (not (self.dense_focus and self.focus_ready) or it.vector is None or memory.type != MemoryType.EPISODIC
                or len(memory.content) <= PASSAGE_CHARS):
            return None
        count = it.shard.dense.passages_of(doc)
        if not count:
            return None
        text = getattr(self.embedder, "passage_prefix", "") + indexed_text(
            memory.content, dated=True, created_at_ms=memory.created_at_ms, entities=memory.entities)
        spans = self._turn_spans(text)
        if len(spans) != count:
            return None
        try:
            rows = it.shard.dense.reconstruct_batch(passage_ids(doc, count))
        except (KeyError, RuntimeError):   # removed since the search
            return None
        return dense_focus(spans, rows, it.vector, len(text) - len(memory.content))

    def _expand_stage(self, items: Sequence[SearchItem], cands: list[Candidates]) -> list[Candidates]:
        """For each reranked query: the second hop (server/engine/expand.py: the turns beside its most relevant
        candidates reach a share of their relevance, below its confident first-round hits), then the speaker it
        names (server/engine/speakers.py: that speaker's turns × ``speaker_factor``), then the turns that end by
        asking (× ``question_factor``)."""
        out = list(cands)
        for i, (it, cand) in enumerate(zip(items, cands, strict=True)):
            if self.rerank_depth(it) <= 0 or len(cand.ids) == 0:
                continue
            if self.expand_turns:
                out[i] = self._hop(it, cand)
            if self.speaker_factor == 1.0 and self.question_factor == 1.0:
                continue
            by_doc = it.shard.store.by_doc
            memories = [by_doc(d) for d in out[i].ids.tolist()]   # the candidates after the hop, read once
            relevance = speaker_relevance(it.query.text, memories, out[i].relevance, factor=self.speaker_factor)
            relevance = question_relevance(memories, relevance, factor=self.question_factor)
            if relevance is not out[i].relevance:
                out[i] = replace(out[i], relevance=relevance)
        return out

    def _hop(self, it: SearchItem, cand: Candidates) -> Candidates:
        """The second hop of one reranked query."""
        seeds = seeds_of(cand)
        turns = adjacent_turns(it.shard.store, cand.ids[seeds].tolist(), radius=self.expand_turns,
                               window_ms=self.expand_window_ms)
        if not turns:
            return cand
        kept = set(_filtered(it.shard, it.query, np.zeros(len(turns)), [d for d, _ in turns], it.now_ms)[0].tolist())
        return second_hop(cand, [t for t in turns if t[0] in kept], seeds, calibration=self.calibration)

    def _rerank_pairs(self, items: Sequence[SearchItem], cands: list[Candidates],
                      ) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
        """Every (query, candidate) pair of the batch within each query's rerank depth."""
        pairs: list[tuple[str, str]] = []
        owners: list[tuple[int, int]] = []
        if self.reranker is None:
            return pairs, owners
        for qi, (it, cand) in enumerate(zip(items, cands, strict=True)):
            for ci, pair in self._candidate_pairs(it, cand, self.rerank_depth(it)):
                pairs.append(pair)
                owners.append((qi, ci))
        return pairs, owners

    async def _fit_depth(self, items: Sequence[SearchItem], cands: list[Candidates]) -> None:
        """The controller's depth for the batch's default-depth queries: the deepest whose pairs' tokens (as the
        cross-encoder truncates them) fit the rerank budget set when the batch formed; queries that asked for
        their own depth run in the same pass, so their pairs' tokens count against it too."""
        default = [i for i, it in enumerate(items) if it.rerank_budget_ms is not None]
        if self.controller is None or self.scorer is None or not default:
            return
        budget_ms: float = items[default[0]].rerank_budget_ms  # type: ignore[assignment]
        if budget_ms > 0:
            lengths, fixed = await asyncio.get_running_loop().run_in_executor(
                self.cpu_pool, self._pass_lengths, items, cands, set(default))
        else:   # overload: depth 0 whatever the tokens, and no CPU spent counting them
            lengths, fixed = [[] for _ in default], 0
        depth = self.controller.fit(budget_ms, lengths, threads=max(it.rerank_threads for it in items),
                                    fixed_tokens=fixed)
        for i in default:
            items[i].depth_cap = depth

    def _pass_lengths(self, items: Sequence[SearchItem], cands: list[Candidates], default: set[int],
                      ) -> tuple[list[list[int]], int]:
        """Pair lengths in tokens of each default-depth query's first full-depth candidates, and the tokens of the
        other queries' pairs (their own depths)."""
        assert self.scorer is not None
        rows: list[list[tuple[int, tuple[str, str]]]] = []
        others: list[tuple[str, str]] = []
        for qi, (it, cand) in enumerate(zip(items, cands, strict=True)):
            if qi in default:
                rows.append(self._candidate_pairs(it, cand, self.default_rerank_depth))
            else:
                others.extend(pair for _, pair in self._candidate_pairs(it, cand, self.rerank_depth(it)))
        flat = self.scorer.pair_tokens([pair for row in rows for _, pair in row] + others)
        lengths, start = [], 0
        for row in rows:   # a candidate's tokens: all of its pairs' (a long chat turn has several)
            per: dict[int, int] = {}
            for (ci, _), n in zip(row, flat[start:start + len(row)], strict=True):
                per[ci] = per.get(ci, 0) + n
            lengths.append(list(per.values()))
            start += len(row)
        return lengths, sum(flat[start:])

    def _apply_rerank(self, items: Sequence[SearchItem], cands: list[Candidates], owners: list[tuple[int, int]],
                      logits: np.ndarray) -> None:
        for (qi, ci), logit in zip(owners, logits.tolist(), strict=True):   # several pairs of one candidate: the best
            cands[qi].rerank[ci] = float(np.fmax(cands[qi].rerank[ci], logit))
        for it, cand in zip(items, cands, strict=True):
            depth = min(self.rerank_depth(it), len(cand.ids))
            if depth == 0:
                continue
            scored = ~np.isnan(cand.rerank[:depth])   # a doc purged since fusion keeps its fused relevance
            head = cand.relevance[:depth].copy()
            logits = cand.rerank[:depth][scored]
            head[scored] = self.calibration.rerank({"logit": logits, "logit_gap": logits - logits.max(initial=-np.inf),
                                                    **{f: v[:depth][scored] for f, v in cand.features.items()}})
            # Candidates past the rerank depth were not read by the cross-encoder: never above the head.
            tail = np.minimum(cand.relevance[depth:], head.min())
            cand.relevance = np.concatenate([head, tail])

