"""The rerank-depth controller: the pure depth rule, the smoothed cost model, and the controller's use of
waits, deadlines and the queue. No clocks: times are given."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from server.batching.batcher import Entry
from server.batching.controller import (TAIL_WINDOW, WIDE_MARGIN, WIDE_PROBE_EVERY, CostModel, RerankController, TailGuard, bucket,
                                       choose_depth)

MS = 1_000_000


@dataclass
class Job:
    origin_ns: int
    deadline_ns: int | None = None


def flat(ms: float):  # noqa: ANN201
    return lambda pairs: ms


def test_idle_gets_the_full_depth() -> None:
    assert choose_depth(full_depth=20, queries=1, batch_left_ms=250, batch_other_ms=10, queue_left_ms=None,
                        queue_other_ms=0, pair_ms=flat(4.0)) == 20


def test_depth_falls_as_the_budget_shrinks_and_is_zero_when_the_other_stages_overrun_it() -> None:
    depths = [choose_depth(full_depth=20, queries=8, batch_left_ms=left, batch_other_ms=40, queue_left_ms=None,
                           queue_other_ms=0, pair_ms=flat(1.0)) for left in (250, 150, 100, 60, 40, 10)]
    assert depths[0] == 20
    assert depths == sorted(depths, reverse=True) and depths[2] < 20
    assert depths[-2:] == [0, 0]
    # The rerank time chosen fits the budget (with the headroom).
    assert 8 * depths[2] * 1.0 <= (100 - 40) * 0.8


def test_the_queue_behind_the_batch_limits_its_depth() -> None:
    alone = choose_depth(full_depth=20, queries=4, batch_left_ms=250, batch_other_ms=20, queue_left_ms=None,
                         queue_other_ms=0, pair_ms=flat(2.0))
    behind = choose_depth(full_depth=20, queries=4, batch_left_ms=250, batch_other_ms=20, queue_left_ms=80,
                          queue_other_ms=40, pair_ms=flat(2.0))
    assert alone == 20 and 0 < behind < alone


def test_the_shape_dependent_cost_is_settled() -> None:
    # Cheap per pair in big batches, dear in small ones: the depth is read at the shape it makes.
    def pair_ms(pairs: int) -> float:
        return 0.5 if pairs >= 64 else 3.0

    depth = choose_depth(full_depth=20, queries=8, batch_left_ms=100, batch_other_ms=20, queue_left_ms=None,
                         queue_other_ms=0, pair_ms=pair_ms)
    assert depth * 8 * pair_ms(depth * 8) <= 80 * 0.8
    assert depth >= 8


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
    c.observe(queries=1, other_ms=10.0, pairs=20, rerank_ms=20.0)      # 1 ms per pair, 10 ms per query
    return c


def test_controller_full_when_idle_shallower_under_load_zero_under_overload_and_back() -> None:
    c = controller()
    now = 1000 * MS
    assert c.choose([Job(now)], [], reranked=1, now_ns=now) == 20
    # Load: a batch of 8 that waited 100 ms, 16 more queued behind, waiting already.
    batch = [Job(now - 100 * MS) for _ in range(8)]
    queued = [Job(now - 60 * MS) for _ in range(16)]
    c.observe(queries=8, other_ms=8 * 6.0, pairs=160, rerank_ms=160 * 0.8)
    loaded = c.choose(batch, queued, reranked=8, now_ns=now)
    assert 0 < loaded < 20
    # Overload: entries already past the target.
    assert c.choose([Job(now - 300 * MS)] * 8, [Job(now - 280 * MS)] * 30, reranked=8, now_ns=now) == 0
    # Idle again: full depth.
    assert c.choose([Job(now)], [], reranked=1, now_ns=now) == 20
    s = c.state()
    assert (s.target_ms, s.full_depth, s.depth, s.device) == (250.0, 20, 20, "cpu")
    assert (s.batches_full, s.batches_reduced, s.batches_skipped) == (2, 1, 1)
    assert s.ms_per_pair > 0


def test_a_deadline_sooner_than_the_target_is_the_budget() -> None:
    c = controller()
    now = 1000 * MS
    assert c.choose([Job(now)], [], reranked=1, now_ns=now) == 20
    assert c.choose([Job(now, deadline_ns=now + 20 * MS)], [], reranked=1, now_ns=now) < 20
    assert c.choose([Job(now, deadline_ns=now + 5 * MS)], [], reranked=1, now_ns=now) == 0


def test_off_or_nothing_to_rerank_is_the_full_depth() -> None:
    off = controller(target_ms=0)
    now = 1000 * MS
    assert off.choose([Job(now - 900 * MS)] * 8, [], reranked=8, now_ns=now) == 20
    assert controller().choose([Job(now - 900 * MS)], [], reranked=0, now_ns=now) == 20


def test_a_batch_reserves_the_time_its_answers_take_after_it_resolves() -> None:
    c = controller()   # 10 ms per query of other stages, 1 ms per pair
    now = 1000 * MS
    batch = [Job(now) for _ in range(8)]
    assert c.choose(batch, [], reranked=8, now_ns=now) == 17          # (250 - 80) x 0.8 = 136 ms: 17 pairs each
    # Each answer takes 3 ms of the event loop after the batch resolved: the last of 8 waits ~24 ms.
    for _ in range(5):
        c.observe_answer(ms=3.0)
    assert c.answer_ms(8) == pytest.approx(24.0) and c.state().ms_answer > 0
    assert c.choose(batch, [], reranked=8, now_ns=now) == 14          # (250 - 80 - 24) x 0.8 = 116.8 ms
    # A lone idle query reserves only its own answer: it still gets the full depth.
    assert c.answer_ms(1) == pytest.approx(3.0)
    assert c.choose([Job(now)], [], reranked=1, now_ns=now) == 20


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
        assert c.choose([queued_now], [], reranked=1, now_ns=now) == 20
        assert c.choose([arrived_early], [], reranked=1, now_ns=now) == 4   # (15 left - 10) x 0.8 = 4 ms
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


def test_an_idle_query_gets_the_full_depth_again_after_load() -> None:
    c = RerankController(target_ms=250.0, full_depth=20, device="cpu", max_requests=64)
    c.observe(queries=30, other_ms=30 * 6.0, pairs=30, rerank_ms=30 * 12.0)   # under load: dear small passes
    c.observe(queries=1, other_ms=20.0, pairs=12, rerank_ms=12 * 8.9)         # idle, at a reduced depth
    now = 1000 * MS
    assert c.choose([Job(now)], [], reranked=1, now_ns=now) == 20             # (250 - 20) x 0.8 = 184 >= 20 x 8.9




def test_a_batch_alone_goes_wide_and_reads_the_wide_cost_model() -> None:
    c = RerankController(target_ms=250.0, full_depth=20, device="cpu", max_requests=64, idle_threads=2)
    c.observe(queries=1, other_ms=20.0, pairs=20, rerank_ms=20 * 12.0)   # one thread: 12 ms a pair
    now = 1000 * MS
    assert c.choose([Job(now)], [], reranked=1, now_ns=now) == 15        # (250 - 20) x 0.8 / 12 = 15.3
    assert c.threads(alone=False) == 0                                     # queued work or another batch: narrow
    assert c.threads(alone=True) == 2                                      # not yet measured: wide, to measure it
    c.observe(queries=1, other_ms=20.0, pairs=15, rerank_ms=15 * 7.0, threads=2)   # wide: 7 ms a pair
    assert c.threads(alone=True) == 2                                      # cheaper per pair: it stays wide
    assert c.choose([Job(now)], [], reranked=1, now_ns=now, threads=2) == 20   # 184 ms >= 20 x 7
    assert c.choose([Job(now)], [], reranked=1, now_ns=now) == 15          # the narrow model is its own
    s = c.state()
    assert (s.idle_threads, s.batches_wide, s.ms_per_pair_wide) == (2, 1, 7.0)
    assert s.ms_per_pair == 12.0


def test_wide_passes_measured_dearer_stay_narrow_but_are_measured_again_now_and_then() -> None:
    # A box shared with busy processes: the two-thread pass waits at barriers and costs more than one thread's.
    c = RerankController(target_ms=250.0, full_depth=20, device="cpu", max_requests=64, idle_threads=2)
    c.observe(queries=1, other_ms=20.0, pairs=20, rerank_ms=20 * 8.0)
    assert c.threads(alone=True) == 2
    c.observe(queries=1, other_ms=20.0, pairs=20, rerank_ms=20 * 30.0, threads=2)
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
    assert c.choose(batch, queued, reranked=4, now_ns=now) == 20     # the cost model alone: it fits
    for _ in range(TAIL_WINDOW):                                       # answers came back at 400 ms
        c.observe_latency(ms=400.0)
    s = c.state()
    assert s.tail_p95_ms == 400.0 and s.load_scale < 0.6
    cut = c.choose(batch, queued, reranked=4, now_ns=now)
    assert cut < 20
    assert c.choose([Job(now)], [], reranked=1, now_ns=now, alone=True) == 20   # alone: the cost model only
    for _ in range(4 * TAIL_WINDOW):                                   # and on until nothing is reranked
        c.observe_latency(ms=400.0)
    assert c.state().load_scale == 0.0 and c.choose(batch, queued, reranked=4, now_ns=now) == 0
    for _ in range(8 * TAIL_WINDOW):                                   # the tail is back under the target
        c.observe_latency(ms=100.0)
    assert c.state().load_scale == 1.0 and c.choose(batch, queued, reranked=4, now_ns=now) == 20


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
    c.observe(queries=1, other_ms=20.0, pairs=20, rerank_ms=20 * 8.0)
    c.observe(queries=1, other_ms=20.0, pairs=20, rerank_ms=20 * 9.0, threads=2)   # 9 < 1.25 x 8
    assert [c.threads(alone=True) for _ in range(5)] == [2] * 5
    c.observe(queries=1, other_ms=20.0, pairs=20, rerank_ms=20 * 13.5, threads=2)  # 9 -> 9.9 ... capped at 1.5x
    c.observe(queries=1, other_ms=20.0, pairs=20, rerank_ms=20 * 13.5, threads=2)
    assert c.wide_pairs.per_unit_ms(20) >= WIDE_MARGIN * 8.0 and c.threads(alone=True) == 0

