"""Fair share per tenant: the pure rules (a tenant's share of a batch and of the queue) and the batcher
that applies them, driven by events (held batches, released on cue), never by sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from async_support import run_async

from server.batching.batcher import Batcher, Entry, Stage
from server.batching.scheduler import active_tenants, admit, hold_last_slot_ns, next_batch, tenant_caps
from server.errors import Overloaded


@dataclass(eq=False)
class Job:
    tenant_id: str
    name: str
    tokens: int = 1
    deadline_ns: int | None = None

    def cancelled(self) -> bool:
        return False


def test_alone_a_tenant_fills_the_batch_contended_it_gets_its_quantum_times_weight() -> None:
    assert tenant_caps({"noisy"}, active=1, weights={}, quantum=4, max_requests=64) == {"noisy": 64}
    assert tenant_caps({"noisy", "quiet"}, active=2, weights={}, quantum=4, max_requests=64) == {"noisy": 4, "quiet": 4}
    # Active counts tenants in flight too: the quiet tenant's query is in a running batch, not queued.
    assert tenant_caps({"noisy"}, active=2, weights={"noisy": 0.1}, quantum=4, max_requests=64) == {"noisy": 1}
    assert tenant_caps({"big"}, active=3, weights={"big": 2.5}, quantum=4, max_requests=64) == {"big": 10}
    assert tenant_caps({"a"}, active=3, weights={}, quantum=0, max_requests=64) == {"a": 64}


def test_a_capped_tenant_leaves_room_for_the_quiet_one_and_waits_in_order() -> None:
    queue = [Job("noisy", f"n{i}") for i in range(30)] + [Job("quiet", "q0")]
    caps = tenant_caps({"noisy", "quiet"}, active=2, weights={}, quantum=4, max_requests=64)
    plan = next_batch(queue, max_tokens=10_000, max_requests=64, now_ns=0, caps=caps)
    assert [j.name for j in plan.batch] == ["n0", "q0", "n1", "n2", "n3"]
    assert [j.name for j in plan.remaining] == [f"n{i}" for i in range(4, 30)]
    # The next batch, noisy alone now: it fills the batch again.
    alone = next_batch(plan.remaining, max_tokens=10_000, max_requests=64, now_ns=0,
                       caps=tenant_caps({"noisy"}, active=1, weights={}, quantum=4, max_requests=64))
    assert len(alone.batch) == 26


def test_many_tenants_within_their_share_batch_together() -> None:
    queue = [Job(f"t{i}", f"t{i}") for i in range(32)]
    caps = tenant_caps({j.tenant_id for j in queue}, active=32, weights={}, quantum=4, max_requests=64)
    assert len(next_batch(queue, max_tokens=10_000, max_requests=64, now_ns=0, caps=caps).batch) == 32


def test_queue_share_rejects_a_flood_and_lets_a_tenant_within_its_share_push_it_out() -> None:
    # Alone, a tenant may use the whole queue.
    assert admit({"noisy": 7}, "noisy", capacity=8, weights={}).accept
    assert not admit({"noisy": 8}, "noisy", capacity=8, weights={}).accept
    # The queue is full of noisy entries: quiet is within its share, noisy's newest makes room.
    verdict = admit({"noisy": 8}, "quiet", capacity=8, weights={})
    assert verdict.accept and verdict.push_out == "noisy"
    # With quiet queued, noisy's share is half the queue.
    assert not admit({"noisy": 4, "quiet": 1}, "noisy", capacity=8, weights={}).accept
    assert admit({"noisy": 3, "quiet": 1}, "noisy", capacity=8, weights={}).accept
    # Weights: a weight-3 tenant's share is three quarters.
    assert admit({"big": 5, "small": 1}, "big", capacity=8, weights={"big": 3.0}).accept
    assert not admit({"big": 6, "small": 1}, "big", capacity=8, weights={"big": 3.0}).accept
    # Everyone within their share and the queue full: no one is pushed out.
    full = admit({"a": 3, "b": 3, "c": 2}, "c", capacity=8, weights={})
    assert not full.accept


class Held(Stage[str, None]):
    """A stage that records batches and holds each in its device step until ``release`` is set."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def device(self, batch: list[Entry[str]]) -> None:
        self.batches.append([e.payload for e in batch])
        self.started.set()
        await self.release.wait()

    async def finish(self, batch: list[Entry[str]], state: None) -> None:
        for entry in batch:
            entry.resolve(entry.payload)


async def settle() -> None:
    """Lets every ready task run (event-loop turns, no timers)."""
    for _ in range(20):
        await asyncio.sleep(0)


@run_async
async def test_batcher_caps_a_flood_per_batch_pushes_it_out_and_counts_rejections_per_tenant() -> None:
    run = Held()
    b: Batcher[str] = Batcher(name="t", stage=run, max_tokens=10_000, max_requests=64, max_wait_ms=0.0,
                              capacity=8, device_slots=1, max_in_flight=1, tenant_quantum=2)

    def submit(payload: str, tenant: str) -> asyncio.Task:
        return asyncio.ensure_future(b.submit(tenant_id=tenant, tokens=1, payload=payload, deadline_ns=None))

    b.start()
    first = submit("n-head", "noisy")
    await run.started.wait()                     # a batch is held on the device
    noisy = [submit(f"n{i}", "noisy") for i in range(8)]
    await settle()
    assert b.depth == 8
    over = submit("n-over", "noisy")             # the queue is full and noisy alone: rejected at once
    await settle()
    assert over.done() and isinstance(over.exception(), Overloaded)
    quiet = submit("q0", "quiet")                # within its share: noisy's newest is pushed out
    await settle()
    assert noisy[-1].done() and isinstance(noisy[-1].exception(), Overloaded)
    assert b.depth == 8 and b.tenant_depths() == {"noisy": (7, 2), "quiet": (1, 0)}
    run.release.set()
    assert await first == "n-head" and await quiet == "q0"
    assert [await t for t in noisy[:-1]] == [f"n{i}" for i in range(7)]
    # While quiet was active the next batch held at most 2 of noisy's.
    second = run.batches[1]
    assert "q0" in second and sum(p.startswith("n") for p in second) == 2
    assert b.stats.rejected == 2
    await b.close()


@pytest.mark.parametrize("weights", [{}, {"noisy": 1.0}])
def test_weights_default_to_equal(weights: dict[str, float]) -> None:
    assert admit({"noisy": 4, "quiet": 1}, "noisy", capacity=8, weights=weights).accept is False


def test_a_tenant_answered_within_the_window_still_counts_as_active() -> None:
    ms = 1_000_000
    answered = {"quiet": 100 * ms, "gone": 10 * ms}
    assert active_tenants({"noisy"}, answered, now_ns=120 * ms, window_ns=50 * ms) == {"noisy", "quiet"}
    assert active_tenants({"noisy"}, answered, now_ns=150 * ms, window_ns=50 * ms) == {"noisy"}   # window over
    assert active_tenants(set(), {}, now_ns=0, window_ns=50 * ms) == set()


def windowed(stage: Stage[str, None], *, window_ms: float, max_in_flight: int, quantum: int, device_slots: int = 1,
             ) -> tuple[Batcher[str], Callable[[str, str], asyncio.Task]]:
    """A started batcher over ``stage`` with the active window at ``window_ms``, and its submit."""
    b: Batcher[str] = Batcher(name="t", stage=stage, max_tokens=10_000, max_requests=64, max_wait_ms=0.0,
                              capacity=64, device_slots=device_slots, max_in_flight=max_in_flight,
                              tenant_quantum=quantum)
    b.active_window_ns = int(window_ms * 1e6)

    def submit(payload: str, tenant: str) -> asyncio.Task:
        return asyncio.ensure_future(b.submit(tenant_id=tenant, tokens=1, payload=payload, deadline_ns=None))

    b.start()
    return b, submit


@run_async
async def test_a_closed_loop_client_between_queries_keeps_the_flood_at_its_quantum() -> None:
    """The quiet client was just answered and has not sent its next query yet: the batch formed in that gap
    still holds at most the quantum of the flood's queries, so the quiet query never waits behind a full one.
    With the window at 0 the flood fills the batch (the behaviour before the window)."""
    for window_ms, noisy_in_second in ((50.0, 2), (0.0, 6)):
        run = Held()
        b, submit = windowed(run, window_ms=window_ms, max_in_flight=1, quantum=2)
        q = submit("q0", "quiet")
        await run.started.wait()                  # the quiet query alone on the device
        run.started.clear()
        run.release.set()
        assert await q == "q0"                    # answered; its client has not sent the next one yet
        run.release.clear()
        head = submit("n-head", "noisy")
        await run.started.wait()                  # the flood's first batch is held on the device
        noisy = [submit(f"n{i}", "noisy") for i in range(6)]
        await settle()
        run.release.set()
        await head
        await asyncio.gather(*noisy)
        assert sum(p.startswith("n") for p in run.batches[2]) == noisy_in_second, (window_ms, run.batches)
        await b.close()


def test_the_last_slot_is_kept_for_an_active_tenant_between_queries_only_while_the_queued_ones_run() -> None:
    ms = 1_000_000
    answered = {"quiet": 100 * ms}
    # The flood has a batch running and the quiet client was answered 10 ms ago: kept until its window ends.
    assert hold_last_slot_ns({"noisy"}, running={"noisy": 1}, in_flight={"noisy"}, answered_ns=answered,
                             now_ns=110 * ms, window_ns=50 * ms) == 40 * ms
    assert hold_last_slot_ns({"noisy"}, running={"noisy": 1}, in_flight={"noisy"}, answered_ns=answered,
                             now_ns=150 * ms, window_ns=50 * ms) == 0            # its window is over
    assert hold_last_slot_ns({"noisy"}, running={"noisy": 0}, in_flight={"noisy"}, answered_ns=answered,
                             now_ns=110 * ms, window_ns=50 * ms) == 0            # a queued tenant has nothing running
    assert hold_last_slot_ns({"noisy", "quiet"}, running={"noisy": 1}, in_flight={"noisy", "quiet"},
                             answered_ns=answered, now_ns=110 * ms, window_ns=50 * ms) == 0   # the quiet one is here
    assert hold_last_slot_ns({"noisy"}, running={"noisy": 1}, in_flight={"noisy", "quiet"}, answered_ns=answered,
                             now_ns=110 * ms, window_ns=50 * ms) == 0            # in flight: not between queries
    assert hold_last_slot_ns(set(), running={}, in_flight=set(), answered_ns=answered, now_ns=110 * ms,
                             window_ns=50 * ms) == 0


class FinishHeld(Stage[str, None]):
    """A stage whose batches leave the device at once and stay in their CPU step until ``release`` is set."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()

    async def device(self, batch: list[Entry[str]]) -> None:
        self.batches.append([e.payload for e in batch])

    async def finish(self, batch: list[Entry[str]], state: None) -> None:
        await self.release.wait()
        for entry in batch:
            entry.resolve(entry.payload)


@pytest.mark.parametrize("stage, max_in_flight, device_slots", [(FinishHeld, 2, 1), (Held, 3, 2)])
def test_a_flood_leaves_the_last_slot_free_while_a_quiet_client_is_between_queries(
        stage: type[Stage[str, None]], max_in_flight: int, device_slots: int) -> None:
    """The quiet client was just answered; the flood has a batch in the pipeline (held in its CPU step, or on one of
    two device slots: a 2-core CPU's default). Its next batch does not take the last free pipeline slot (or device
    slot), so the quiet query that arrives next forms a batch at once, with the flood's quantum, instead of waiting
    for a flood batch to leave. With the window at 0 the flood takes the slot (and, alone, the whole batch)."""

    @run_async
    async def check() -> None:
        for window_ms, second in ((50.0, ["n0", "q1"]), (0.0, ["n0", "n1", "n2"])):
            run = stage()
            b, submit = windowed(run, window_ms=window_ms, max_in_flight=max_in_flight, quantum=1,
                                 device_slots=device_slots)
            run.release.set()
            assert await submit("q0", "quiet") == "q0"   # answered; the client has not sent its next query yet
            run.release.clear()
            head = submit("n-head", "noisy")
            await settle()
            noisy = [submit(f"n{i}", "noisy") for i in range(3)]
            await settle()
            quiet = submit("q1", "quiet")
            await settle()
            assert run.batches[1:3] == [["n-head"], second], (window_ms, run.batches)
            run.release.set()
            assert await quiet == "q1" and await head == "n-head"
            await asyncio.gather(*noisy)
            await b.close()

    check()
