"""The rerank-depth controller: the pure budget and depth rules (a pass priced by its tokens), the smoothed cost
model, and the controller's use of waits, deadlines and the queue. No clocks: times are given."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import pytest

from server.batching.batcher import Entry
from server.batching.controller import (PRIOR_PAIR_TOKENS, SPREAD_CAP, SPREAD_MIN, SPREAD_WINDOW, TAIL_WINDOW,
                                       WIDE_MARGIN, WIDE_PROBE_EVERY, CostModel,
                                       RerankController, TailGuard, bucket, fit_depth, pass_tokens, rerank_budget_ms)

MS = 1_000_000
T = PRIOR_PAIR_TOKENS   # the tokens of a "typical" pair below: ms per pair = T x ms per token


@dataclass
class Job:
    origin_ns: int
    deadline_ns: int | None = None


def flat(ms_per_token: float):  # noqa: ANN201
    return lambda tokens: ms_per_token


def observe(c: RerankController, *, queries: int, other_ms: float, pairs: int, pair_ms: float, threads: int = 0,
            tokens_per_pair: int = T) -> None:
    """A measured batch whose pass took ``pair_ms`` a pair of ``tokens_per_pair`` tokens."""
    c.observe(queries=queries, other_ms=other_ms, pairs=pairs, tokens=pairs * tokens_per_pair,
              rerank_ms=pairs * pair_ms, threads=threads)


def choose(c: RerankController, batch: list[Job], queued: list[Job], *, reranked: int, now_ns: int, threads: int = 0,
           alone: bool = False, tokens_per_pair: int = T) -> int:
    """The depth the controller gives a batch whose queries' candidates are all pairs of ``tokens_per_pair``."""
    budget = c.budget(batch, queued, reranked=reranked, now_ns=now_ns, alone=alone)
    return c.fit(budget, [[tokens_per_pair] * c.full_depth] * reranked, threads=threads)


def test_the_budget_is_what_the_batch_and_the_queue_leave() -> None:
    assert rerank_budget_ms(batch_left_ms=250, batch_other_ms=10, queue_left_ms=None, queue_other_ms=0) == 192.0
    behind = rerank_budget_ms(batch_left_ms=250, batch_other_ms=10, queue_left_ms=80, queue_other_ms=40)
    assert behind == pytest.approx(32.0)
    assert rerank_budget_ms(batch_left_ms=40, batch_other_ms=60, queue_left_ms=None, queue_other_ms=0) == 0.0


def test_idle_gets_the_full_depth_and_the_depth_falls_as_the_budget_shrinks() -> None:
    lengths = [[50] * 20 for _ in range(8)]
    depths = [fit_depth(budget_ms=budget, lengths=lengths, full_depth=20, token_ms=flat(0.01))
              for budget in (200, 80, 40, 10, 3, 0)]
    assert depths[0] == 20
    assert depths == sorted(depths, reverse=True) and 0 < depths[2] < 20
    assert depths[-2:] == [0, 0]
    # The chosen depth fits the budget, one more does not.
    assert pass_tokens(lengths, depths[2]) * 0.01 <= 40 < pass_tokens(lengths, depths[2] + 1) * 0.01


def test_long_memories_get_a_smaller_depth_than_short_ones_under_the_same_budget() -> None:
    # The bundled cross-encoder reads a short LoCoMo turn as ~40 tokens and a 1 KB memory as its limit, 128.
    budget, price = 60.0, flat(0.045)   # ms; 45 us a token
    short = fit_depth(budget_ms=budget, lengths=[[40] * 20], full_depth=20, token_ms=price)
    long = fit_depth(budget_ms=budget, lengths=[[128] * 20], full_depth=20, token_ms=price)
    assert short == 20 and long == 10        # 20 x 40 x 0.045 = 36 ms; 60 / (128 x 0.045) = 10.4 pairs
    mixed = fit_depth(budget_ms=budget, lengths=[[128] * 10 + [40] * 10], full_depth=20, token_ms=price)
    assert mixed == 11                       # ten long (57.6 ms), then one short (1.8 ms) still fits


def test_pairs_other_queries_asked_for_count_against_the_budget() -> None:
    lengths = [[64] * 20]
    alone = fit_depth(budget_ms=20.0, lengths=lengths, full_depth=20, token_ms=flat(0.01))
    beside = fit_depth(budget_ms=20.0, lengths=lengths, full_depth=20, token_ms=flat(0.01), fixed_tokens=1000)
    assert alone == 20 and beside == 15      # (2000 - 1000) / 64 = 15.6 pairs
    assert fit_depth(budget_ms=20.0, lengths=lengths, full_depth=20, token_ms=flat(0.01), fixed_tokens=2001) == 0


def test_no_budget_or_nothing_to_rerank_is_the_full_depth_and_short_candidate_lists_count_what_they_have() -> None:
    assert fit_depth(budget_ms=math.inf, lengths=[[128] * 20], full_depth=20, token_ms=flat(1.0)) == 20
    assert fit_depth(budget_ms=0.0, lengths=[], full_depth=20, token_ms=flat(1.0)) == 20
    assert fit_depth(budget_ms=0.0, lengths=[[]], full_depth=20, token_ms=flat(1.0)) == 0   # overload: not counted
    # A query with three candidates costs their tokens at any depth: the other one's depth is what moves.
    assert pass_tokens([[100] * 3, [10] * 20], 20) == 500
    assert fit_depth(budget_ms=4.5, lengths=[[100] * 3, [10] * 20], full_depth=20, token_ms=flat(0.01)) == 15


def test_the_shape_dependent_cost_is_read_at_the_pass_the_depth_makes() -> None:
    # Cheap per token in big passes, dear in small ones.
    def token_ms(tokens: int) -> float:
        return 0.005 if tokens >= 4096 else 0.03

    lengths = [[64] * 20 for _ in range(8)]
    depth = fit_depth(budget_ms=25.0, lengths=lengths, full_depth=20, token_ms=token_ms)
    tokens = pass_tokens(lengths, depth)
    assert depth == 9 and tokens * token_ms(tokens) <= 25.0   # 4,608 tokens x 0.005 = 23.0 ms; 10: 25.6 ms


def test_cost_model_smooths_by_shape_and_reads_the_nearest_bucket() -> None:
    model = CostModel(prior_ms=7.0, smoothing=0.5)
    assert model.per_unit_ms(10) == 7.0 and not model.measured()
    model.observe(100, 200.0)      # 2 ms per pair at ~100 pairs
    assert model.per_unit_ms(100) == 2.0
    assert model.per_unit_ms(3) == 2.0          # nearest measured bucket
    model.observe(100, 250.0)      # 2.5 ms per pair: EWMA 0.5
    assert model.per_unit_ms(100) == 2.25
    model.observe(4, 40.0)         # a small batch: its own bucket
    assert model.per_unit_ms(4) == 10.0 and model.per_unit_ms(100) == 2.25
    model.observe(100, 100 * 22.5)   # one stalled pass, 10x: counted as 1.5x the estimate
    assert model.per_unit_ms(100) == pytest.approx(0.5 * 2.25 + 0.5 * 1.5 * 2.25)
    for _ in range(12):              # a lasting slowdown is followed, a step at a time
        model.observe(100, 100 * 10.0)
    assert model.per_unit_ms(100) == pytest.approx(10.0, rel=0.02)
    model.observe(0, 5.0)
    model.observe(3, float("nan"))
    assert bucket(4) != bucket(100)


def controller(target_ms: float = 250.0) -> RerankController:
    c = RerankController(target_ms=target_ms, full_depth=20, device="cpu", max_requests=64)
    observe(c, queries=1, other_ms=10.0, pairs=20, pair_ms=1.0)      # 1 ms per pair, 10 ms per query
    return c


def test_controller_full_when_idle_shallower_under_load_zero_under_overload_and_back() -> None:
    c = controller()
    now = 1000 * MS
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now) == 20
    # Load: a batch of 8 that waited 100 ms, 16 more queued behind, waiting already.
    batch = [Job(now - 100 * MS) for _ in range(8)]
    queued = [Job(now - 60 * MS) for _ in range(16)]
    observe(c, queries=8, other_ms=8 * 6.0, pairs=160, pair_ms=0.8)
    loaded = choose(c, batch, queued, reranked=8, now_ns=now)
    assert 0 < loaded < 20
    # Overload: entries already past the target.
    assert choose(c, [Job(now - 300 * MS)] * 8, [Job(now - 280 * MS)] * 30, reranked=8, now_ns=now) == 0
    # Idle again: full depth.
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now) == 20
    s = c.state()
    assert (s.target_ms, s.full_depth, s.depth, s.device) == (250.0, 20, 20, "cpu")
    assert (s.batches_full, s.batches_reduced, s.batches_skipped) == (2, 1, 1)
    assert s.ms_per_pair > 0


def test_a_deadline_sooner_than_the_target_is_the_budget() -> None:
    c = controller()
    now = 1000 * MS
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now) == 20
    assert choose(c, [Job(now, deadline_ns=now + 20 * MS)], [], reranked=1, now_ns=now) < 20
    assert choose(c, [Job(now, deadline_ns=now + 5 * MS)], [], reranked=1, now_ns=now) == 0


def test_off_or_nothing_to_rerank_is_the_full_depth() -> None:
    off = controller(target_ms=0)
    now = 1000 * MS
    assert choose(off, [Job(now - 900 * MS)] * 8, [], reranked=8, now_ns=now) == 20
    assert choose(controller(), [Job(now - 900 * MS)], [], reranked=0, now_ns=now) == 20


def test_a_batch_reserves_the_time_its_answers_take_after_it_resolves() -> None:
    c = controller()   # 10 ms per query of other stages, 1 ms per pair
    now = 1000 * MS
    batch = [Job(now) for _ in range(8)]
    assert choose(c, batch, [], reranked=8, now_ns=now) == 17          # (250 - 80) x 0.8 = 136 ms: 17 pairs each
    # Each answer takes 3 ms of the event loop after the batch resolved: the last of 8 waits ~24 ms.
    for _ in range(5):
        c.observe_answer(ms=3.0)
    assert c.answer_ms(8) == pytest.approx(24.0) and c.state().ms_answer > 0
    assert choose(c, batch, [], reranked=8, now_ns=now) == 14          # (250 - 80 - 24) x 0.8 = 116.8 ms
    # A lone idle query reserves only its own answer: it still gets the full depth.
    assert c.answer_ms(1) == pytest.approx(3.0)
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now) == 20


def test_the_budget_counts_from_the_requests_arrival_not_its_enqueue() -> None:
    c = controller()
    loop = asyncio.new_event_loop()
    try:
        now = 1000 * MS

        def entry(**origin: int) -> Entry[None]:
            return Entry(tenant_id="t", tokens=1, deadline_ns=None, payload=None, future=loop.create_future(),
                         enqueued_ns=now, **origin)

        queued_now, arrived_early = entry(), entry(origin_ns=now - 235 * MS)   # e.g. a shard load before the queue
        assert queued_now.origin_ns == now and arrived_early.origin_ns == now - 235 * MS
        assert choose(c, [queued_now], [], reranked=1, now_ns=now) == 20
        assert choose(c, [arrived_early], [], reranked=1, now_ns=now) == 4   # (15 left - 10) x 0.8 = 4 ms
    finally:
        loop.close()


def test_a_shape_measured_dear_under_load_never_reads_dearer_than_a_smaller_one() -> None:
    # After load: 20-pair batches measured at 12 ms per pair (contended), then idle 12-pair ones at 9 ms.
    model = CostModel(prior_ms=1.0, smoothing=1.0)
    model.observe(20, 20 * 12.0)
    model.observe(12, 12 * 9.0)
    assert model.per_unit_ms(12) == 9.0
    assert model.per_unit_ms(20) == 9.0   # not the stale 12: a bigger batch costs no more per pair
    model.observe(20, 20 * 8.5)           # measured again at that shape: its own figure
    assert model.per_unit_ms(20) == 8.5 and model.per_unit_ms(12) == 9.0


def test_a_smaller_shape_measured_before_does_not_hide_a_dearer_bigger_one() -> None:
    # The start's seeding pass on a quiet CPU (900 tokens), then long passes on a busy one (2,000 tokens).
    model = CostModel(prior_ms=1.0, smoothing=1.0)
    model.observe(900, 900 * 0.05)
    model.observe(2000, 2000 * 0.08)
    assert model.per_unit_ms(2000) == 0.08 and model.per_unit_ms(900) == 0.05
    model.observe(900, 900 * 0.06)        # measured since: a bigger pass costs no more per token than it
    assert model.per_unit_ms(2000) == 0.06


def test_an_idle_query_gets_the_full_depth_again_after_load() -> None:
    c = RerankController(target_ms=250.0, full_depth=20, device="cpu", max_requests=64)
    observe(c, queries=30, other_ms=30 * 6.0, pairs=30, pair_ms=12.0)   # under load: dear small passes
    observe(c, queries=1, other_ms=20.0, pairs=12, pair_ms=8.9)         # idle, at a reduced depth
    now = 1000 * MS
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now) == 20             # (250 - 20) x 0.8 = 184 >= 20 x 8.9




def test_a_batch_alone_goes_wide_and_reads_the_wide_cost_model() -> None:
    c = RerankController(target_ms=250.0, full_depth=20, device="cpu", max_requests=64, idle_threads=2)
    observe(c, queries=1, other_ms=20.0, pairs=20, pair_ms=12.0)   # one thread: 12 ms a pair
    now = 1000 * MS
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now) == 15        # (250 - 20) x 0.8 / 12 = 15.3
    assert c.threads(alone=False) == 0                                     # queued work or another batch: narrow
    assert c.threads(alone=True) == 2                                      # not yet measured: wide, to measure it
    observe(c, queries=1, other_ms=20.0, pairs=15, pair_ms=7.0, threads=2)   # wide: 7 ms a pair
    assert c.threads(alone=True) == 2                                      # cheaper per pair: it stays wide
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now, threads=2) == 20   # 184 ms >= 20 x 7
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now) == 15          # the narrow model is its own
    s = c.state()
    assert (s.idle_threads, s.batches_wide, s.ms_per_pair_wide) == (2, 1, 7.0)
    assert s.ms_per_pair == 12.0


def test_wide_passes_measured_dearer_stay_narrow_but_are_measured_again_now_and_then() -> None:
    # A box shared with busy processes: the two-thread pass waits at barriers and costs more than one thread's.
    c = RerankController(target_ms=250.0, full_depth=20, device="cpu", max_requests=64, idle_threads=2)
    observe(c, queries=1, other_ms=20.0, pairs=20, pair_ms=8.0)
    assert c.threads(alone=True) == 2
    observe(c, queries=1, other_ms=20.0, pairs=20, pair_ms=30.0, threads=2)
    picks = [c.threads(alone=True) for _ in range(3 * WIDE_PROBE_EVERY)]
    assert picks.count(2) == 3 and picks.count(0) == 3 * WIDE_PROBE_EVERY - 3


def test_no_idle_threads_means_every_pass_is_narrow() -> None:
    c = controller()
    assert [c.threads(alone=True) for _ in range(WIDE_PROBE_EVERY + 1)] == [0] * (WIDE_PROBE_EVERY + 1)
    assert c.state().idle_threads == 0 and c.state().ms_per_pair_wide == 0.0


def test_the_observed_tail_cuts_the_budget_under_load_and_gives_it_back() -> None:
    c = controller()   # 10 ms per query of other stages, 1 ms per pair
    now = 1000 * MS
    batch, queued = [Job(now) for _ in range(4)], [Job(now)]
    assert choose(c, batch, queued, reranked=4, now_ns=now) == 20     # the cost model alone: it fits
    for _ in range(TAIL_WINDOW):                                       # answers came back at 400 ms
        c.observe_latency(ms=400.0)
    s = c.state()
    assert s.tail_p95_ms == 400.0 and s.load_scale < 0.6
    cut = choose(c, batch, queued, reranked=4, now_ns=now)
    assert cut < 20
    assert choose(c, [Job(now)], [], reranked=1, now_ns=now, alone=True) == 20   # alone: the cost model only
    for _ in range(4 * TAIL_WINDOW):                                   # and on until nothing is reranked
        c.observe_latency(ms=400.0)
    assert c.state().load_scale == 0.0 and choose(c, batch, queued, reranked=4, now_ns=now) == 0
    for _ in range(8 * TAIL_WINDOW):                                   # the tail is back under the target
        c.observe_latency(ms=100.0)
    assert c.state().load_scale == 1.0 and choose(c, batch, queued, reranked=4, now_ns=now) == 20


def test_the_tail_guard_waits_for_enough_new_answers_and_holds_between_the_bands() -> None:
    guard = TailGuard(target_ms=250.0, window=16)
    for _ in range(7):
        guard.observe(900.0)
    assert guard.scale == 1.0 and guard.p95_ms == 0.0                  # under half a window: no reading yet
    guard.observe(900.0)
    assert guard.scale == 0.7 and guard.p95_ms == 900.0
    for _ in range(16):
        guard.observe(240.0)                                           # between 0.9 x and 1 x the target: held
    # Readings every 4 new answers: the three that still held a 900 cut it, the last (all 240) holds it.
    assert guard.p95_ms == 240.0 and guard.scale == pytest.approx(0.7 ** 4)
    guard.observe(float("nan"))
    guard.observe(-1.0)
    assert guard.p95_ms == 240.0
    off = TailGuard(target_ms=0.0)
    for _ in range(100):
        off.observe(1e6)
    assert off.scale == 1.0


def test_a_wide_pass_a_little_dearer_than_the_narrow_estimate_still_goes_wide() -> None:
    # The narrow estimate is the least of its buckets: noise alone must not send lone batches narrow.
    c = RerankController(target_ms=250.0, full_depth=20, device="cpu", max_requests=64, idle_threads=2)
    observe(c, queries=1, other_ms=20.0, pairs=20, pair_ms=8.0)
    observe(c, queries=1, other_ms=20.0, pairs=20, pair_ms=9.0, threads=2)   # 9 < 1.25 x 8
    assert [c.threads(alone=True) for _ in range(5)] == [2] * 5
    observe(c, queries=1, other_ms=20.0, pairs=20, pair_ms=13.5, threads=2)  # 9 -> 9.9 ... capped at 1.5x
    observe(c, queries=1, other_ms=20.0, pairs=20, pair_ms=13.5, threads=2)
    assert c.wide_tokens.per_unit_ms(20 * T) * T >= WIDE_MARGIN * 8.0 and c.threads(alone=True) == 0



def test_the_spread_is_how_far_recent_passes_went_above_their_estimate() -> None:
    model = CostModel(prior_ms=1.0, smoothing=0.2)
    model.observe(100, 100.0)
    for _ in range(SPREAD_MIN - 2):
        model.observe(100, 100.0)
    assert model.spread() == 1.0                       # too few compared yet
    for _ in range(SPREAD_WINDOW):                      # steady passes: priced at the mean
        model.observe(100, 100.0)
    assert model.spread() == 1.0 and model.tail_ms(100) == pytest.approx(1.0)
    for i in range(SPREAD_WINDOW):                      # one pass in four takes 1.6x what it was priced at
        model.observe(100, 100.0 * (1.6 if i % 4 == 0 else 0.95) * model.per_unit_ms(100))
    assert 1.5 < model.spread() <= 1.6
    assert model.tail_ms(100) == pytest.approx(model.per_unit_ms(100) * model.spread())
    for _ in range(SPREAD_WINDOW):                      # stalls of 10x: capped
        model.observe(100, 1000.0 * model.per_unit_ms(100))
    assert model.spread() == SPREAD_CAP


def test_a_pass_whose_cost_varies_is_priced_at_its_tail_not_its_mean() -> None:
    """Two controllers with the same mean pass cost (1 ms a pair): passes that vary get a smaller idle depth, so that
    the slow ones still fit the target; steady ones keep the full depth."""
    steady, varying = controller(), controller()
    for i in range(2 * SPREAD_WINDOW):
        observe(steady, queries=1, other_ms=10.0, pairs=20, pair_ms=1.0)
        observe(varying, queries=1, other_ms=10.0, pairs=20, pair_ms=1.6 if i % 4 == 0 else 0.8)
    now = 1000 * MS
    long_pairs = 7 * T   # long memories: a pair of 7x the typical tokens (20 of them: 140 ms at the mean)
    full = choose(steady, [Job(now)], [], reranked=1, now_ns=now, alone=True, tokens_per_pair=long_pairs)
    tail = choose(varying, [Job(now)], [], reranked=1, now_ns=now, alone=True, tokens_per_pair=long_pairs)
    assert steady.tokens.spread() == 1.0 and varying.tokens.spread() > 1.4
    assert full == 20 and tail < full
    # the deepest pass it allows fits the budget at the spread's price: (250 - 10) x 0.8 = 192 ms
    assert tail * long_pairs * varying.tokens.tail_ms(tail * long_pairs) <= 192.0
