"""The rerank-depth controller: how many fused candidates each batch's queries send to the cross-encoder,
so that queries meet ``search.latency_target_ms`` (or their own, tighter, gRPC deadline).

It works in two steps. When a batch forms (the batcher's loop, the scheduler side) it sets the batch's rerank
budget (:meth:`RerankController.budget`); once the batch's candidates are fused, it fits the depth to that
budget by the tokens of the pairs that depth would rerank (:meth:`RerankController.fit`), and the search pipeline
runs it and reports what its stages cost. The cost model is measured at run time on the reranker's device:
milliseconds per token of a pass (query + memory, as the cross-encoder truncates the pair), smoothed, in buckets
of the pass's token count (a pass of 5,000 tokens costs less per token than one of 100), and milliseconds per query
for the rest of the pipeline (embedding, BM25, dense search, fusion, ranking). A cross-encoder's cost grows with its
pairs' tokens, not their count: the bundled one reads at most 128 tokens of a pair, ~40 for a short LoCoMo turn and
all 128 for a 1 KB memory (one thread, bfloat16: 45-60 us a token either way, so 20 long pairs cost 2-3.5x 20 short
ones); priced by the pair, a tenant of long memories got the depth its short-memory measurements allowed and missed
the target (1 KB turns, one idle client on a busy 2-core box: p95 358-426 ms at depth 18-20, priced by the token
230 ms at a mean depth of 16.6; benchmarks/results/serving/long_memories.md). For a batch of default-depth
queries, the depth ``d`` costs ``tokens(d) x ms_per_token(tokens(d))``, where ``tokens(d)`` sums each query's
first ``d`` candidates' pair lengths (and the pairs of queries that asked for their own depth, which run in the same
pass), and the depth is the largest one whose cost fits in both:

- the batch's own budget: the tightest remaining time of its entries (``target - waited``, or the
  deadline) less the batch's other stages and its answer time;
- the queue's: the next batch forms once this one's device work is done, so the entries still queued
  wait for this batch's reranking too; their tightest remaining time less their own batch's stages.

A query's time counts from its arrival at the engine (``origin_ns``: before the recall gate, the shard
lookup and the queue), and ends when its answer leaves the engine, not when its batch resolves: a batch's
answers are finished one after another on the event loop (hits checked, uses recorded, the audit line,
the context block), so the last of n waits for the n - 1 before it. Each answer's own time is measured
too and a batch of n reserves n of them; without it the controller met its target at the batch's resolve
while clients saw ~30 ms more at 32 clients (1 x 10k, with rerank: server total mean 234 ms, client
p95 306 ms against the 250 ms target).

Idle, both are close to the whole target and the depth is the full default; as the queue grows the
waits eat the budget and the depth falls; once the other stages alone overrun it (overload) the depth
is 0, and the queue drains at the speed of the pipeline without the cross-encoder. A headroom factor
keeps the mean cost model below the target's tail (the target is read as a p95).

**The observed tail, fed back.** The cost model sees the queue as it is when a batch forms, not the
clients that come back while the batch reranks (in a closed loop, those of the other batch in the
pipeline): at 32 clients a 2-core server answered 98 % of queries at depth 0, yet spent about 60 % of its
device time on the rare batches that reranked (24 queries x a few candidates each), and p95 was 361 ms
against the 250 ms target. So every default-depth answer's latency (arrival to answer) also goes into a
window (:class:`TailGuard`); when its p95 is over the target, the share of the budget a batch under load may
spend on reranking (``load_scale``) is cut, and it grows back while the p95 is under ``TAIL_LOW`` of the
target. A batch alone reads the cost model only: nothing but itself waits for its pass.

**The idle cores.** The server runs each forward pass with half the CPU's cores (on a small box the other
half serves gRPC, FAISS and Lucene for the batches beside it, or, on 2-3 cores, a second device thread's
pass: server/app.py ``device_threads``). A batch that forms
alone (nothing queued, no other batch in the pipeline) has nobody beside it: its cross-encoder pass takes
``idle_threads`` torch threads, every core, and the controller reads that pass's cost from a cost model of
its own. On a 2-core CPU 20 LoCoMo pairs take ~100 ms with two threads against ~165 ms with one, so the
idle query gets the full depth within the target. Where the wide pass measures dearer than the narrow one
by ``WIDE_MARGIN`` (a box shared with other busy processes: OpenMP threads wait at barriers for a descheduled
peer), batches stay narrow, and one in ``WIDE_PROBE_EVERY`` alone goes wide anyway to measure it again.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

HEADROOM = 0.8          # the cost model is a mean; the target is a tail
SMOOTHING = 0.2         # EWMA weight of a new measurement
OUTLIER_CAP = 1.5       # a measurement counts as at most this many times the smoothed value (one slow pass)
PRIOR_PAIR_TOKENS = 64  # tokens of a pair before the first pass is measured (what ms_per_pair is reported at)
PRIOR_TOKEN_MS = 1.0 / PRIOR_PAIR_TOKENS   # ms per token before the first measurement (a CPU cross-encoder's order)
PRIOR_QUERY_MS = 5.0    # ms per query for the other stages before the first measurement
WIDE_PROBE_EVERY = 16   # a batch alone goes wide this often even when wide passes measured dearer: re-measured
WIDE_MARGIN = 1.25      # alone batches go narrow only when a wide pass reads this much dearer per pair than a narrow one
TAIL_WINDOW = 64        # answers the observed tail is read over (a quarter of them new before each reading)
TAIL_DECREASE = 0.7     # the load scale's cut when the window's p95 is over the target
TAIL_INCREASE = 0.05    # its step back up when the window's p95 is under TAIL_LOW x the target
TAIL_LOW = 0.8
# The pass is priced at its tail, not its mean: the cost model's estimate x the SPREAD_QUANTILE of how the last
# SPREAD_WINDOW passes measured against the estimate they were priced at (at least 1, at most SPREAD_CAP; 1 until
# SPREAD_MIN passes were compared). One client, ~1 KB memories, an idle server on a busy 2-core box: the estimate
# matched the mean pass (10.0 ms a pair against 10.4 measured) while one pass in ten took 1.25-1.55x it, and those
# made the p95 (283 ms at depths of 13-19, 250 ms target; docs/benchmarks/serving.md, long memories).
SPREAD_WINDOW = 32
SPREAD_QUANTILE = 0.9
SPREAD_MIN = 8
SPREAD_CAP = 2.0


class Timed(Protocol):
    """What the controller reads of a queued entry (``Entry`` fits): when its request arrived, and its deadline."""

    @property
    def origin_ns(self) -> int: ...
    @property
    def deadline_ns(self) -> int | None: ...


def bucket(units: int) -> int:
    """Shape bucket of a batch with ``units`` pairs (or queries): its power of two."""
    return max(0, int(units).bit_length() - 1)


class CostModel:
    """Smoothed milliseconds per unit (token or query), by shape bucket. A bucket never measured reads its
    nearest measured neighbour (then the prior). Written from executor threads: a lock guards the dicts.
    :meth:`spread` says how far above their estimate recent measurements went (the pass priced at its tail)."""

    def __init__(self, *, prior_ms: float, smoothing: float = SMOOTHING) -> None:
        self.prior_ms = prior_ms
        self.smoothing = smoothing
        self._ms: dict[int, float] = {}
        self._seen: dict[int, int] = {}   # bucket -> the count of observations when it was last observed
        self._count = 0
        self._ratios: collections.deque[float] = collections.deque(maxlen=SPREAD_WINDOW)   # measured / estimate
        self._lock = threading.Lock()

    def observe(self, units: int, ms: float) -> None:
        if units <= 0 or not math.isfinite(ms) or ms < 0:
            return
        per_unit, b = ms / units, bucket(units)
        if self._ms:
            estimate = self.per_unit_ms(units)   # what this shape was priced at: the ratio is the model's own error
            if estimate > 0:
                self._ratios.append(per_unit / estimate)
        with self._lock:
            old = self._ms.get(b)
            # One slow pass (a shared box: a descheduled OpenMP thread) moves the estimate by at most
            # smoothing x (OUTLIER_CAP - 1); a lasting slowdown is followed over a few passes. Uncapped, single
            # stalls cut an idle query's depth: 1 client, 22 % of queries below the full 20 (min 5).
            per_unit = per_unit if old is None else min(per_unit, OUTLIER_CAP * old)
            self._ms[b] = per_unit if old is None else (1 - self.smoothing) * old + self.smoothing * per_unit
            self._count += 1
            self._seen[b] = self._count

    def per_unit_ms(self, units: int) -> float:
        """The nearest measured bucket's value, and never more than a smaller shape's measured since: a bigger
        batch costs no more per unit. A shape measured only under load keeps that dear figure until it runs
        again, and a controller that then avoids the shape never refreshes it (after a 32-client run, one idle
        client got depth 12 of 20: the 16-31 pair bucket still read its contended cost). Only fresher smaller
        shapes count: the start's seeding pass, measured on a quiet CPU, would otherwise price every later pass
        at its figure however dear those measure (1 KB memories on a shared 2-core box: p95 264 ms, the passes
        costing 1.6x the seed's per token)."""
        with self._lock:
            if not self._ms:
                return self.prior_ms
            b = bucket(units)
            near = min(self._ms, key=lambda k: (abs(k - b), k))
            fresher = [v for k, v in self._ms.items() if k < b and self._seen[k] > self._seen[near]]
            return min([self._ms[near], *fresher])

    def measured(self) -> bool:
        return bool(self._ms)

    def spread(self) -> float:
        """The ``SPREAD_QUANTILE`` of the last measurements over the estimates they were priced at, in
        [1, ``SPREAD_CAP``] (1 before ``SPREAD_MIN`` of them)."""
        with self._lock:
            ratios = sorted(self._ratios)
        if len(ratios) < SPREAD_MIN:
            return 1.0
        return min(SPREAD_CAP, max(1.0, ratios[min(len(ratios) - 1, math.ceil(SPREAD_QUANTILE * len(ratios)) - 1)]))

    def tail_ms(self, units: int) -> float:
        """:meth:`per_unit_ms` x :meth:`spread`: the price of a unit in a pass that must fit a tail target."""
        return self.per_unit_ms(units) * self.spread()


def rerank_budget_ms(*, batch_left_ms: float, batch_other_ms: float, queue_left_ms: float | None,
                     queue_other_ms: float, headroom: float = HEADROOM) -> float:
    """The milliseconds a batch's rerank pass may take: what both its own budget and the queue's leave.

    ``batch_left_ms``: the tightest remaining time of the batch's entries; ``batch_other_ms``: the batch's
    stages other than reranking; ``queue_left_ms`` (None: nothing queued behind): the tightest remaining
    time of the entries still queued; ``queue_other_ms``: their own batch's other stages."""
    budget = batch_left_ms - batch_other_ms
    if queue_left_ms is not None:
        budget = min(budget, queue_left_ms - queue_other_ms)
    return max(0.0, budget * headroom)


def pass_tokens(lengths: Sequence[Sequence[int]], depth: int, *, fixed_tokens: int = 0) -> int:
    """Tokens of a pass that reranks each query's first ``depth`` pairs (``lengths[q]``: its candidates' pair
    lengths, best first), plus ``fixed_tokens`` of pairs the pass runs whatever the depth."""
    return fixed_tokens + sum(sum(row[:depth]) for row in lengths)


def fit_depth(*, budget_ms: float, lengths: Sequence[Sequence[int]], full_depth: int,
              token_ms: Callable[[int], float], fixed_tokens: int = 0) -> int:
    """The largest depth in [0, full_depth] whose pass fits ``budget_ms``: ``pass_tokens`` x ``token_ms`` (ms per
    token at that pass's size). Long memories get a smaller depth than short ones under the same budget."""
    if full_depth <= 0 or not lengths:
        return max(0, full_depth)
    if math.isinf(budget_ms):
        return full_depth
    if budget_ms <= 0:   # overload: nothing fits (the caller need not count the pairs' tokens)
        return 0
    for depth in range(full_depth, 0, -1):
        tokens = pass_tokens(lengths, depth, fixed_tokens=fixed_tokens)
        if tokens * max(token_ms(tokens), 1e-12) <= budget_ms:
            return depth
    return 0


@dataclass(frozen=True)
class ControllerState:
    """What Info and /metrics report."""

    target_ms: float        # 0: off (always the full depth)
    full_depth: int
    depth: int              # the depth the last batch got
    ms_per_pair: float      # smoothed ms per token at the last pass's size x the mean pair's tokens
    ms_per_query: float     # the other stages, smoothed, at the last batch's size
    device: str
    batches_full: int
    batches_reduced: int
    batches_skipped: int    # depth 0 (overload)
    ms_answer: float = 0.0  # answering the last batch's queries after it resolved (the last one's wait), smoothed
    idle_threads: int = 0   # torch threads of a batch's cross-encoder pass when it runs alone (0: never wide)
    ms_per_pair_wide: float = 0.0   # smoothed, such passes' cost per mean pair at the full depth (0: not measured)
    batches_wide: int = 0   # batches whose cross-encoder pass ran with idle_threads
    load_scale: float = 1.0         # the share of its budget a batch under load may rerank with (TailGuard)
    tail_p95_ms: float = 0.0        # the p95 of the last default-depth answers' latencies (0: too few yet)
    ms_per_token: float = 0.0       # smoothed, narrow passes at the last pass's size
    pair_tokens: float = 0.0        # the mean pair's tokens of the passes so far (smoothed)


class TailGuard:
    """The p95 of the last ``window`` default-depth answers' latencies, and the load scale it moves: once a
    quarter of the window is new, ``scale`` (in [0, 1]) is cut by ``TAIL_DECREASE`` if the p95 is over the
    target, or raised by ``TAIL_INCREASE`` if it is under ``TAIL_LOW`` x the target. Every answer counts,
    depth 0 included, so a scale at 0 recovers once the tail is back under the target. Written from the
    event loop; read there too (a lock all the same: cheap)."""

    def __init__(self, *, target_ms: float, window: int = TAIL_WINDOW) -> None:
        self.target_ms = target_ms
        self.window = max(4, window)
        self._ms: collections.deque[float] = collections.deque(maxlen=self.window)
        self._new = 0
        self.scale = 1.0
        self.p95_ms = 0.0
        self._lock = threading.Lock()

    def observe(self, ms: float) -> None:
        if self.target_ms <= 0 or not math.isfinite(ms) or ms < 0:
            return
        with self._lock:
            self._ms.append(ms)
            self._new += 1
            if self._new < self.window // 4 or len(self._ms) < self.window // 2:
                return
            self._new = 0
            ordered = sorted(self._ms)
            self.p95_ms = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
            if self.p95_ms > self.target_ms:
                self.scale = self.scale * TAIL_DECREASE if self.scale > 0.02 else 0.0
            elif self.p95_ms < TAIL_LOW * self.target_ms:
                self.scale = min(1.0, self.scale + TAIL_INCREASE)


class RerankController:
    """Owns the cost models and the depth decisions; ``budget`` runs on the event loop when a batch forms, ``fit``
    once its candidates are fused, ``observe`` on executor threads when its stages finish."""

    def __init__(self, *, target_ms: float, full_depth: int, device: str, max_requests: int,
                 prior_token_ms: float = PRIOR_TOKEN_MS, idle_threads: int = 0) -> None:
        self.target_ns = int(target_ms * 1_000_000)
        self.full_depth = full_depth
        self.device = device
        self.max_requests = max(1, max_requests)
        self.tokens = CostModel(prior_ms=prior_token_ms)        # ms per token of narrow passes
        self.idle_threads = idle_threads                       # 0: every pass narrow
        self.wide_tokens = CostModel(prior_ms=prior_token_ms)  # passes with idle_threads
        self._alone = 0
        self.queries = CostModel(prior_ms=PRIOR_QUERY_MS)
        self.answers = CostModel(prior_ms=0.0)   # ms of one answer's own work after its batch resolved
        self.tail = TailGuard(target_ms=target_ms)
        self.depth = full_depth
        self.pair_tokens = float(PRIOR_PAIR_TOKENS)   # the mean pair's tokens, smoothed (reported, and the wide rule)
        self._last_tokens = PRIOR_PAIR_TOKENS
        self._last_queries = 1
        self.counts = {"full": 0, "reduced": 0, "skipped": 0, "wide": 0}

    @property
    def enabled(self) -> bool:
        return self.target_ns > 0 and self.full_depth > 0

    def _left_ms(self, entries: Sequence[Timed], now_ns: int) -> float:
        """The tightest time left of these entries: target since arrival, or the deadline if sooner."""
        left = math.inf
        for e in entries:
            end = e.origin_ns + self.target_ns
            if e.deadline_ns is not None:
                end = min(end, e.deadline_ns)
            left = min(left, (end - now_ns) / 1e6)
        return left

    def _full_pass_tokens(self) -> int:
        return max(1, round(self.full_depth * self.pair_tokens))

    def threads(self, *, alone: bool) -> int:
        """Torch threads for this batch's cross-encoder pass: ``idle_threads`` when it runs alone and such
        passes are not measured dearer per token (or it is their turn to be measured again), else 0 (the
        server's setting)."""
        if self.idle_threads <= 0 or not alone:
            return 0
        self._alone += 1
        if not self.wide_tokens.measured() or self._alone % WIDE_PROBE_EVERY == 0:
            wide = True
        else:
            # A margin: the narrow estimate is the least of its buckets (CostModel.per_unit_ms), so a plain
            # comparison can flip on noise, and a narrow pass costs ~1.6x a wide one on an idle 2-core CPU.
            tokens = self._full_pass_tokens()
            wide = (not self.tokens.measured() or self.wide_tokens.per_unit_ms(tokens)
                    < WIDE_MARGIN * self.tokens.per_unit_ms(tokens))
        return self.idle_threads if wide else 0

    def budget(self, batch: Sequence[Timed], queued: Sequence[Timed], *, reranked: int, now_ns: int,
               alone: bool = False) -> float:
        """The milliseconds this batch's rerank pass may take (``math.inf``: off, or no default-depth query); its
        default-depth queries are ``reranked`` of the batch; ``alone``: nothing queued and no other batch in the
        pipeline (the observed tail's load scale does not apply)."""
        if not self.enabled or reranked == 0:
            return math.inf
        n = len(batch)
        nxt = min(len(queued), self.max_requests)
        return rerank_budget_ms(
            batch_left_ms=self._left_ms(batch, now_ns),
            batch_other_ms=n * self.queries.per_unit_ms(n) + self.answer_ms(n),
            queue_left_ms=self._left_ms(queued[:self.max_requests], now_ns) if queued else None,
            queue_other_ms=nxt * self.queries.per_unit_ms(nxt) + self.answer_ms(nxt) if nxt else 0.0,
            headroom=HEADROOM * (1.0 if alone else self.tail.scale))

    def fit(self, budget_ms: float, lengths: Sequence[Sequence[int]], *, threads: int = 0,
            fixed_tokens: int = 0) -> int:
        """The depth of a batch's default-depth queries: ``lengths[q]`` are query q's candidates' pair lengths in
        tokens (best first, at least the full depth's); ``fixed_tokens``: pairs the same pass runs for queries that
        asked for their own depth; ``threads``: the pass's (:meth:`threads`), whose cost model it reads."""
        if not self.enabled or not lengths:
            return self.full_depth
        depth = fit_depth(budget_ms=budget_ms, lengths=lengths, full_depth=self.full_depth, fixed_tokens=fixed_tokens,
                          token_ms=(self.wide_tokens if threads > 0 else self.tokens).tail_ms)
        self.depth = depth
        self.counts["full" if depth >= self.full_depth else "reduced" if depth > 0 else "skipped"] += 1
        return depth

    def answer_ms(self, queries: int) -> float:
        """The answer time a batch of ``queries`` reserves: its last answer waits for the others' on the event loop."""
        return queries * self.answers.per_unit_ms(1) if queries > 0 else 0.0

    def observe_latency(self, *, ms: float) -> None:
        """A default-depth query's latency, from its arrival at the engine to its answer (:class:`TailGuard`)."""
        self.tail.observe(ms)

    def observe_answer(self, *, ms: float) -> None:
        """One answer's own work after its batch resolved (hits checked, uses recorded, audit line, context block).
        Its own, not its wait: the wait behind other batches' answers under load is no cost an idle query pays."""
        self.answers.observe(1, ms)

    def observe(self, *, queries: int, other_ms: float, pairs: int, tokens: int, rerank_ms: float,
                threads: int = 0) -> None:
        """A batch's measured cost: ``other_ms`` for its stages but reranking, ``rerank_ms`` for ``pairs`` of
        ``tokens`` in all (pairs the cross-encoder scored, cached ones excluded; ``threads``: its pass's, as
        :meth:`threads` gave)."""
        if queries > 0:
            self.queries.observe(queries, other_ms)
            self._last_queries = queries
        if pairs <= 0 or tokens <= 0:
            return
        self.pair_tokens += SMOOTHING * (tokens / pairs - self.pair_tokens)
        if threads > 0:
            self.wide_tokens.observe(tokens, rerank_ms)
            self.counts["wide"] += queries > 0   # 0: the start's seeding pass (search.measure_rerank_cost)
        else:
            self.tokens.observe(tokens, rerank_ms)
            self._last_tokens = tokens

    def state(self) -> ControllerState:
        ms_per_token = self.tokens.per_unit_ms(self._last_tokens)
        return ControllerState(
            target_ms=self.target_ns / 1e6, full_depth=self.full_depth, depth=self.depth,
            ms_per_pair=ms_per_token * self.pair_tokens, ms_per_query=self.queries.per_unit_ms(self._last_queries),
            ms_answer=self.answer_ms(self._last_queries), device=self.device, batches_full=self.counts["full"],
            batches_reduced=self.counts["reduced"], batches_skipped=self.counts["skipped"],
            idle_threads=self.idle_threads, batches_wide=self.counts["wide"], load_scale=self.tail.scale,
            tail_p95_ms=self.tail.p95_ms, ms_per_token=ms_per_token, pair_tokens=self.pair_tokens,
            ms_per_pair_wide=(self.wide_tokens.per_unit_ms(self._full_pass_tokens()) * self.pair_tokens
                              if self.wide_tokens.measured() else 0.0))
