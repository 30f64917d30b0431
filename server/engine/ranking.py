"""The ranking stage: one decay × importance × temporal kernel call over every candidate of a batch
(segmented by query), then each query's top_k with its score breakdown. ``final = relevance × recency ×
importance × temporal`` (README "Ranking"); the kernel (CuPy on CUDA, its NumPy twin elsewhere) is
``kernels/decay.py``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from kernels.decay import DecayRanker
from server.config import ScoringConfig
from server.domain import Breakdown, Hit, MemoryType, QueryResult, SearchQuery, TimeIntent, Timings
from server.engine import importance_intent, siblings, time_intent, updates
from server.engine.candidates import Candidates, SearchItem
from server.store.access import access_boost_inputs
from server.temporal import parse_time_windows, window_weight

TEMPORAL_AFTER = 1.0   # window_weight's fall-off after a window's end, in window lengths
# recency = (1 - a) + a × decay, importance = (1 - b) + b × importance (a request's Scoring may set its own).
# a = b = 0.3: the largest equal weights with (1 - a)(1 - b) >= 1/2, so a memory with twice another's relevance
# always ranks above it, whatever their ages and importances (at 0.5 / 0.5 it took 4×: the issue's "where does
# alice live" lost its year-old Lisbon memory, relevance 0.25, to a pinned allergy at 0.14). Within that bound the
# weight grid of make bench-quality on the dev sets (offline over each query's top 100 at the defaults) is flat:
# LoCoMo recall@10 0.749 at 0.3 / 0.3 vs 0.751 at 0.5 / 0.5 (0.745 with decay off, 0.189 on the plain curve);
# the recency set's answer-above-its-stale-twin share 0.40 vs 0.55 at 0.5 / 0.5 and 0.33 with decay off, so decay
# still beats decay-off there (README "Retrieval quality", what chose each default).
RECENCY_WEIGHT = 0.3
IMPORTANCE_WEIGHT = 0.3
DECAY_FLOOR = 0.0          # decay = floor + (1 - floor) × 0.5^(age / half-life); 0: the plain curve (a bounds it)
# A query naming a time ("last week", "in May 2023", "上周"): memories created inside it get up to × (1 + boost)
TEMPORAL_BOOST = 0.3
# Each recorded use adds ACCESS_IMPORTANCE_STEP to the importance the ranking reads, times the recency decay since
# the last use, never above ACCESS_IMPORTANCE_MAX (server/store/access.py); the stored importance stays the writer's.
ACCESS_IMPORTANCE_STEP = 0.02
ACCESS_IMPORTANCE_MAX = 0.9
DEFAULT_TOP_K = 10         # hits of a query that asks for top_k 0
# The importance intent (server/engine/importance_intent.py): on. Recency set recall@1 0.650 -> 0.675 (dev), 0.375 ->
# 0.425 (held out), zh/en nDCG@10 0.7503 -> 0.7523; no LoCoMo question and no SciFact claim carries its cues.
IMPORTANCE_INTENT = True
# Sibling statements (server/engine/siblings.py): off. Recency set recall@1 +0.125 dev, +0.225 held out, but zh/en
# nDCG@10 0.7503 -> 0.7474 and LoCoMo dev recall@10 0.792 -> 0.791 (docs/concepts/updates.md; python -m
# benchmarks.quality.updates_ab --query-rules).
SIBLING_RULE = False
# Newest first (server/engine/siblings.py, newest_first): statements in a query's top siblings.SLOTS hits that describe
# the same attribute of the same subject hold their slots newest first. On: recency set recall@1 0.675 -> 0.800 (dev),
# 0.425 -> 0.600 (held out); LoCoMo and SciFact unchanged by construction, zh/en nDCG@10 and the knowledge-update set
# unchanged (docs/concepts/updates.md; python -m benchmarks.quality.recency_rules eval). A newer statement holding every
# query word of an older one joins it (siblings.NEWER_SUPERSET): the second dev set 0.800 -> 0.822, the first unchanged.
NEWEST_FIRST = True


def _ranks_of(docs: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> tuple[list[int], list[float]]:
    """Each doc's 1-based rank and score in one retriever's filtered list; (0, 0.0) where it is absent."""
    if len(docs) == 0 or len(ids) == 0:
        return [0] * len(docs), [0.0] * len(docs)
    match = docs[:, None] == ids[None, :]
    found = match.any(axis=1)
    at = match.argmax(axis=1)
    return np.where(found, at + 1, 0).tolist(), np.where(found, scores[at], 0.0).tolist()


class RankStage:
    def __init__(self, *, ranker: DecayRanker, scoring: ScoringConfig, default_top_k: int = DEFAULT_TOP_K,
                 access_step: float = ACCESS_IMPORTANCE_STEP, access_cap: float = ACCESS_IMPORTANCE_MAX) -> None:
        self.ranker = ranker
        self.scoring = scoring
        self.default_top_k = default_top_k
        self.access_step = access_step
        self.access_cap = access_cap

    def _half_lives(self, query: SearchQuery) -> np.ndarray:
        """Half-life in seconds by ``int(MemoryType)`` (0: never decays)."""
        s, cfg = query.scoring, self.scoring
        by_type = np.zeros(len(MemoryType) + 1, dtype=np.float64)
        if s.disable_decay:
            return by_type
        defaults = cfg.half_lives()
        for t in MemoryType:
            override = getattr(s, f"{t.name.lower()}_half_life_s")
            by_type[int(t)] = defaults[t.name] if override is None else override
        return by_type

    def _importance_weight(self, query: SearchQuery) -> float:
        if query.scoring.disable_importance:
            return 0.0
        w = query.scoring.importance_weight
        if w is not None:
            return w
        # A query asking what to know or remember raises it (server/engine/importance_intent.py); not in the ablations.
        return IMPORTANCE_WEIGHT if query.scoring.disable_decay or not IMPORTANCE_INTENT else importance_intent.importance_weight(
            query.text, IMPORTANCE_WEIGHT)

    def _recency_weight(self, query: SearchQuery, intent: TimeIntent = TimeIntent.NONE) -> float:
        if query.scoring.disable_decay:
            return 0.0
        w = query.scoring.recency_weight
        return time_intent.recency_weight(intent, RECENCY_WEIGHT) if w is None else w

    @staticmethod
    def _intent(query: SearchQuery) -> TimeIntent:
        """The query's time intent (server/engine/time_intent.py); none when decay is off (the ablations)."""
        return TimeIntent.NONE if query.scoring.disable_decay else time_intent.detect(query.text)

    @staticmethod
    def _update_factor(it: SearchItem, intent: TimeIntent, rows: np.ndarray, links: np.ndarray, decay: np.ndarray,
                       relevance: np.ndarray) -> np.ndarray:
        """The update factor of each candidate (server/engine/time_intent.py): its chain of linked memories read
        from the store for the few candidates that have links."""
        linked = np.flatnonzero(links)
        store = it.shard.store
        chains = {tip: [int(linked[j]) for j in js] for tip, js in updates.chains_of(
            rows[linked].tolist(), by_doc=store.by_doc, get=store.get).items()}
        position = {int(doc): i for i, doc in zip(linked.tolist(), rows[linked].tolist(), strict=True)}

        def target_of(tip_id: str, want: str) -> int | None:
            tip = store.get(tip_id)
            target = None if tip is None else updates.chain_target(tip, want=want, get=store.get)
            return None if target is None else position.get(target.doc_id)

        factor = time_intent.update_factor(intent, links, decay, relevance, chains=chains, target_of=target_of)
        # Unlinked sibling statements the query cannot tell apart: the newest answers (server/engine/siblings.py).
        if not SIBLING_RULE:
            return factor
        return factor * siblings.sibling_factor(
            it.query.text, intent, lambda i: None if links[i] else store.by_doc(int(rows[i])), relevance)

    @staticmethod
    def _newest_first(it: SearchItem, intent: TimeIntent, top: np.ndarray, offset: int, cand: Candidates,
                      final: np.ndarray) -> tuple[np.ndarray, dict[int, float]]:
        """The query's ranked positions after siblings.newest_first reorders its top SLOTS, and the slot score each
        moved position now holds (server/engine/siblings.py); unchanged when the rule is off or finds no group."""
        n = min(siblings.SLOTS, len(top))
        if not NEWEST_FIRST or n < 2 or it.query.scoring.disable_decay:
            return top, {}
        docs = cand.ids[top[:n] - offset]
        memories = [it.shard.store.by_doc(int(d)) for d in docs.tolist()]
        if sum(m is not None and siblings.joinable(m) for m in memories) < 2:
            return top, {}
        vectors = None
        if siblings.PAIR_COSINE is not None:   # the statements' own embeddings as evidence (not read by default)
            try:
                vectors = it.shard.dense.reconstruct_batch(docs)
            except (KeyError, RuntimeError):   # a candidate deleted since fusion: leave the order
                return top, {}
        order = siblings.newest_first(it.query.text, intent, memories, vectors)
        if order == list(range(n)):
            return top, {}
        out = top.copy()
        out[:n] = top[:n][order]
        return out, {int(out[s]): float(final[top[s]]) for s in range(n) if order[s] != s}

    def _decay_floor(self, query: SearchQuery) -> float:
        floor = query.scoring.decay_floor
        return DECAY_FLOOR if floor is None else floor

    def _temporal(self, it: SearchItem, created_ms: np.ndarray) -> np.ndarray:
        """1 + boost × (how far each memory's creation lies inside a time the query names), else 1."""
        if it.query.scoring.disable_temporal or TEMPORAL_BOOST <= 0:
            return np.ones(len(created_ms))
        windows = parse_time_windows(it.query.text, now_ms=it.now_ms)
        if not windows:
            return np.ones(len(created_ms))
        # Memories are written at or after what they describe: the fall-off after a window is wider.
        return 1.0 + TEMPORAL_BOOST * window_weight(created_ms, windows, after_fraction=TEMPORAL_AFTER)

    def __call__(self, items: Sequence[SearchItem], cands: list[Candidates], timings: Timings) -> list[QueryResult]:
        """One decay × importance kernel call over every candidate of the batch (segmented)."""
        t0 = time.monotonic_ns()
        names = ("relevance", "age_s", "half_life", "weight", "pinned", "floor", "recency_w", "boost", "cap", "factor")
        parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
        offsets = [0]
        intents = [self._intent(it.query) for it in items]
        factors: list[np.ndarray] = []     # the update factor (server/engine/time_intent.py)
        temporals: list[np.ndarray] = []
        for it, cand, intent in zip(items, cands, intents, strict=True):
            cols = it.shard.store.columns()
            rows = cand.ids  # every fused doc passed the filter, so it has a row in this (later, never shorter) view
            n = len(rows)
            w = self._importance_weight(it.query)
            importance = cols.importance[rows]
            boost, cap = access_boost_inputs(importance, cols.access_count[rows], weight=w, step=self.access_step,
                                             cap=self.access_cap)
            parts["relevance"].append(cand.relevance)
            age_s = np.maximum(0.0, (it.now_ms - cols.last_access_ms[rows]) / 1000.0)
            half_life = self._half_lives(it.query)[cols.type[rows]]
            parts["age_s"].append(age_s)
            parts["half_life"].append(half_life)
            # Per-query importance weights ride in one launch: pass the finished weight, w = 1.
            parts["weight"].append((1.0 - w) + w * importance)
            parts["pinned"].append(cols.pinned[rows])
            parts["floor"].append(np.full(n, self._decay_floor(it.query)))
            parts["recency_w"].append(np.full(n, self._recency_weight(it.query, intent)))
            parts["boost"].append(boost)
            parts["cap"].append(cap)
            decay = np.where((half_life > 0) & ~cols.pinned[rows],
                             0.5 ** (age_s / np.where(half_life > 0, half_life, 1.0)), 1.0)
            factors.append(np.ones(n) if it.query.scoring.disable_decay else   # the ablations: relevance alone
                           self._update_factor(it, intent, rows, cols.links[rows], decay, cand.relevance))
            temporals.append(self._temporal(it, cols.created_ms[rows]))
            parts["factor"].append(temporals[-1] * factors[-1])
            offsets.append(offsets[-1] + n)

        def joined(name: str, dtype: type = np.float32) -> np.ndarray:
            return np.concatenate(parts[name]).astype(dtype, copy=False) if parts[name] else np.zeros(0, dtype=dtype)

        top_k = max((it.query.top_k or self.default_top_k) for it in items)
        depth = max(top_k, siblings.SLOTS) if NEWEST_FIRST else top_k   # newest_first reads the top SLOTS of each

        ranked = self.ranker(joined("relevance"), joined("age_s"), joined("half_life"), joined("weight"),
                             joined("pinned", np.bool_), np.asarray(offsets, dtype=np.int64), top_k=depth,
                             importance_weight=1.0, decay_floor=joined("floor"), recency_weight=joined("recency_w"),
                             boost=joined("boost"), weight_cap=joined("cap"), factor=joined("factor"))
        recency = ranked.recency if ranked.recency is not None else ranked.decay
        update = np.concatenate(factors) if factors else np.zeros(0)
        factor = np.concatenate(temporals) if temporals else np.zeros(0)
        timings.decay_ns = timings.lap("decay", t0)
        results: list[QueryResult] = []
        for qi, (it, cand) in enumerate(zip(items, cands, strict=True)):
            top = ranked.indices[qi, :depth]
            top = top[top >= 0]
            top, slot_final = self._newest_first(it, intents[qi], top, offsets[qi], cand, ranked.final)
            top = top[: it.query.top_k or self.default_top_k]
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
                # A hit newest_first moved holds its slot's score; the change shows in its update factor.
                final = slot_final.get(gi, float(ranked.final[gi]))
                moved = final / float(ranked.final[gi]) if gi in slot_final and ranked.final[gi] > 0 else 1.0
                hits.append(Hit(memory=memory, breakdown=Breakdown(
                    dense_rank=d_ranks[j], dense_score=d_scores[j], bm25_rank=l_ranks[j], bm25_score=l_scores[j],
                    rrf=float(cand.rrf[ci]), rerank=None if np.isnan(rerank) else rerank,
                    relevance=float(cand.relevance[ci]), decay=float(ranked.decay[gi]),
                    importance_weight=float(ranked.weight[gi]), final=final,
                    recency=float(recency[gi]), temporal=float(factor[gi]), update=float(update[gi]) * moved,
                    time_intent=intents[qi])))
            results.append(QueryResult(hits=tuple(hits), timings=timings))
        return results
