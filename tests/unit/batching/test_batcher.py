"""The async batcher: full queue, cancellation before device work, failure isolation, batching, waits.

Event-driven: each test waits on the recorder's events or lets ready tasks run (``settle``), never on the
wall clock; the straggler wait is the one timed behaviour, and its test waits for the batch to form.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from async_support import run_async

from server.batching.batcher import Batcher, Entry, Stage, split_at
from server.errors import DeadlineExceeded, Overloaded


class Recorder(Stage[str, None]):
    """A stage that records what it ran and can be held in its device step (``device``) or after it
    (``gate``) until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.device_open = asyncio.Event()   # held batches finish their device step when this is set
        self.device_open.set()
        self.formed = asyncio.Event()        # set (and cleared by the test) as each batch starts
        self.in_flight = 0
        self.max_in_flight = 0

    async def device(self, batch: list[Entry[str]]) -> None:
        self.batches.append([e.payload for e in batch])
        self.formed.set()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.device_open.wait()
        except BaseException:
            self.in_flight -= 1
            raise

    async def finish(self, batch: list[Entry[str]], state: None) -> None:
        try:
            await self.gate.wait()
            for entry in batch:
                if entry.payload.startswith("boom"):
                    raise RuntimeError("model failed")
                entry.resolve(entry.payload.upper())
        finally:
            self.in_flight -= 1


def make(run: Recorder, **kw: object) -> Batcher[str]:
    opts: dict[str, object] = dict(name="t", stage=run, max_tokens=10_000, max_requests=8, max_wait_ms=2.0,
                                   capacity=64, device_slots=2)
    opts.update(kw)
    return Batcher(**opts)  # type: ignore[arg-type]


def submit(b: Batcher[str], payload: str, tenant: str = "a", deadline_ns: int | None = None) -> asyncio.Task:
    return asyncio.ensure_future(b.submit(tenant_id=tenant, tokens=len(payload), payload=payload,
                                          deadline_ns=deadline_ns))


async def settle() -> None:
    """Lets every ready task run (event-loop turns, no timers)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def formed(run: Recorder, count: int) -> None:
    """Waits until ``count`` batches have started (an event per batch; the timeout only guards a hang)."""
    while len(run.batches) < count:
        run.formed.clear()
        await asyncio.wait_for(run.formed.wait(), timeout=10)


@run_async
async def test_full_queue_is_rejected_at_once_and_nothing_is_queued() -> None:
    run = Recorder()
    run.gate.clear()
    b = make(run, capacity=3, max_requests=1)
    b.start()
    first = submit(b, "x0")
    await formed(run, 1)               # x0 is running (held); the queue is empty again
    queued = [submit(b, f"q{i}") for i in range(3)]
    await settle()                     # q0 joins x0 in flight (two batches in the pipeline) ...
    assert len(run.batches) == 2 and b.depth == 2
    queued.append(submit(b, "q3"))     # ... and the queue fills to its capacity
    await settle()
    assert b.depth == 3
    over = submit(b, "over")
    await asyncio.sleep(0)             # one loop turn: the answer needs no wait
    assert over.done() and isinstance(over.exception(), Overloaded)
    assert b.stats.rejected == 1 and b.depth == 3
    run.gate.set()
    assert await first == "X0"
    assert [await q for q in queued] == [f"Q{i}" for i in range(len(queued))]
    assert "over" not in [p for batch in run.batches for p in batch]
    await b.close()


@run_async
async def test_cancelled_and_expired_requests_never_reach_the_device() -> None:
    run = Recorder()
    run.gate.clear()
    b = make(run, max_requests=1, max_in_flight=1)
    b.start()
    head = submit(b, "head")
    await formed(run, 1)
    doomed = submit(b, "cancelled")
    deadline = time.monotonic_ns() + 2_000_000
    expiring = submit(b, "expired", deadline_ns=deadline)
    kept = submit(b, "kept")
    await settle()
    doomed.cancel()
    while time.monotonic_ns() <= deadline:   # the expiring one's deadline passes while queued
        await asyncio.sleep(0)
    run.gate.set()
    assert await head == "HEAD" and await kept == "KEPT"
    with pytest.raises(DeadlineExceeded):
        await expiring
    ran = [p for batch in run.batches for p in batch]
    assert "cancelled" not in ran and "expired" not in ran
    assert b.stats.dropped == 2
    await b.close()


@run_async
async def test_a_failed_batch_fails_only_its_own_requests() -> None:
    run = Recorder()
    b = make(run, max_requests=2, max_wait_ms=0.0)
    b.start()
    bad = submit(b, "boom")
    await formed(run, 1)
    good = submit(b, "fine")
    with pytest.raises(RuntimeError):
        await bad
    assert await good == "FINE"
    assert await b.submit(tenant_id="a", tokens=1, payload="after", deadline_ns=None) == "AFTER"
    await b.close()


@run_async
async def test_a_failed_device_step_frees_its_device_slot() -> None:
    class Failing(Recorder):
        async def device(self, batch: list[Entry[str]]) -> None:
            await super().device(batch)
            if batch[0].payload == "boom":
                self.in_flight -= 1
                raise RuntimeError("forward pass failed")

    run = Failing()
    b = make(run, max_requests=1, device_slots=1, max_in_flight=1, max_wait_ms=0.0)
    b.start()
    with pytest.raises(RuntimeError):
        await submit(b, "boom")
    assert await asyncio.wait_for(submit(b, "next"), timeout=10) == "NEXT"
    await b.close()


@run_async
async def test_concurrent_requests_share_batches_and_at_most_two_run_at_once() -> None:
    run = Recorder()
    run.gate.clear()
    b = make(run, max_requests=8)
    b.start()
    jobs = [submit(b, f"p{i}", tenant=f"t{i % 3}") for i in range(40)]
    await formed(run, 2)
    await settle()
    assert run.max_in_flight == 2 and len(run.batches) == 2
    run.gate.set()
    assert sorted(await asyncio.gather(*jobs)) == sorted(f"P{i}" for i in range(40))
    assert max(len(batch) for batch in run.batches) == 8
    assert b.stats.mean_batch_size > 4
    await b.close()


@run_async
async def test_an_idle_device_does_not_wait_for_stragglers() -> None:
    run = Recorder()
    b = make(run, max_wait_ms=60_000.0)   # a minute: a wait would show as the timeout below
    b.start()
    solo = b.submit(tenant_id="a", tokens=1, payload="solo", deadline_ns=None)
    assert await asyncio.wait_for(solo, timeout=10) == "SOLO"
    await b.close()


@run_async
async def test_a_busy_device_waits_at_most_max_wait_for_a_fuller_batch() -> None:
    run = Recorder()
    run.device_open.clear()             # the first batch stays on the device
    b = make(run, max_wait_ms=200.0, max_requests=8)
    b.start()
    first = submit(b, "first")          # runs at once: the device was idle
    await formed(run, 1)
    a = submit(b, "a")                  # the device is busy: the next batch waits for stragglers ...
    await settle()
    assert len(run.batches) == 1        # ... so it has not formed yet ...
    c = submit(b, "c")                  # ... and this one joins it
    await formed(run, 2)                # it forms when max_wait has passed, not full (8) and not released
    assert sorted(run.batches[1]) == ["a", "c"]
    run.device_open.set()
    await asyncio.gather(first, a, c)
    assert run.batches[0] == ["first"]
    await b.close()


@run_async
async def test_with_one_device_slot_the_next_batch_forms_when_the_device_frees() -> None:
    run = Recorder()
    run.device_open.clear()             # the first batch stays in its device step
    b = make(run, max_requests=8, device_slots=1, max_wait_ms=0.0)
    b.start()
    first = submit(b, "first")
    await formed(run, 1)
    waiting = [submit(b, f"w{i}") for i in range(5)]
    await settle()
    assert run.batches == [["first"]] and b.depth == 5   # a pipeline slot is free, the device is not
    run.device_open.set()               # the first batch's forward pass ends: everything queued forms one batch
    assert await first == "FIRST" and [await w for w in waiting] == [f"W{i}" for i in range(5)]
    assert run.batches == [["first"], [f"w{i}" for i in range(5)]]
    await b.close()


@run_async
async def test_a_batch_past_its_device_stage_overlaps_the_next_one() -> None:
    run = Recorder()
    run.gate.clear()                    # batches finish their device step at once, then are held
    b = make(run, max_requests=2, device_slots=1, max_in_flight=2, max_wait_ms=0.0)
    b.start()
    jobs = [submit(b, f"p{i}") for i in range(6)]
    await formed(run, 2)
    await settle()
    assert run.max_in_flight == 2 and len(run.batches) == 2   # the pipeline bound still holds
    run.gate.set()
    assert sorted(await asyncio.gather(*jobs)) == [f"P{i}" for i in range(6)]
    await b.close()


def test_device_slots_rule() -> None:
    from server.batching.batcher import device_slots

    assert device_slots(64) == 1 and device_slots(2) == 1 and device_slots(1) == 2
    # Two device threads: a slot each, batched or not.
    assert device_slots(64, 2) == 2 and device_slots(1, 2) == 2 and device_slots(1, 3) == 3


def test_max_in_flight_leaves_one_batch_finishing_beside_each_device_thread() -> None:
    from server.batching.batcher import max_in_flight

    assert max_in_flight(64) == 2 and max_in_flight(1) == 2       # one device thread: as before
    assert max_in_flight(64, 2) == 3 and max_in_flight(1, 2) == 3


@run_async
async def test_two_device_slots_run_two_batches_on_the_device_at_once() -> None:
    """Two device slots: a second batch enters its device step while the first still holds its own."""
    entered, release = asyncio.Event(), asyncio.Event()
    inside = {"now": 0, "most": 0}

    class Both(Stage[int, None]):
        async def device(self, batch: list[Entry[int]]) -> None:
            inside["now"] += 1
            inside["most"] = max(inside["most"], inside["now"])
            if inside["now"] == 2:
                entered.set()
            await release.wait()
            inside["now"] -= 1

        async def finish(self, batch: list[Entry[int]], state: None) -> None:
            for e in batch:
                e.resolve(e.payload)

    b = Batcher(name="t", stage=Both(), max_tokens=1000, max_requests=1, max_wait_ms=0.0, capacity=8,
                device_slots=2, max_in_flight=3)
    b.start()
    calls = [asyncio.create_task(b.submit(tenant_id="a", tokens=1, payload=i, deadline_ns=None)) for i in range(3)]
    await asyncio.wait_for(entered.wait(), 5)
    assert inside["most"] == 2   # the third waits for a slot
    release.set()
    assert await asyncio.gather(*calls) == [0, 1, 2]
    assert inside["most"] == 2
    await b.close()


def test_split_at_caps_a_batch_at_half_the_active_requests_and_never_below_its_floor() -> None:
    assert split_at(32, split_above=16, max_requests=64) == 16
    assert split_at(64, split_above=16, max_requests=64) == 32
    assert split_at(65, split_above=16, max_requests=64) == 33
    assert split_at(8, split_above=16, max_requests=64) == 16       # light load: the floor, no split
    assert split_at(200, split_above=16, max_requests=64) == 64
    assert split_at(32, split_above=0, max_requests=64) == 64       # off
    assert split_at(32, split_above=16, max_requests=1) == 1        # no batching


@run_async
async def test_a_bunch_of_requests_goes_to_the_device_in_two_cohorts() -> None:
    run = Recorder()
    run.device_open.clear()
    b = make(run, max_requests=64, max_wait_ms=0.0, device_slots=1, split_above=4)
    b.start()
    head = submit(b, "head")
    await formed(run, 1)                      # head holds the device; 12 arrive meanwhile
    tasks = [head, *[submit(b, f"q{i}") for i in range(12)]]
    await settle()
    run.device_open.set()
    assert [await t for t in tasks] == ["HEAD", *[f"Q{i}" for i in range(12)]]
    # 13 active: batches of at most 7; without the cap the 12 would have gone in one batch.
    assert [len(batch) for batch in run.batches][:3] == [1, 7, 5]
    await b.close()
