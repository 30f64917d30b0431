"""The async side of batching: a bounded queue, a loop that asks the scheduler for batches, and a
runner that executes them. The scheduler decides (``scheduler.next_batch``); this module only waits,
hands out and resolves futures. Never sleep-polls: it wakes on arrivals.

The batcher drives a :class:`Stage`: ``shape`` as a batch forms, then ``device`` (the forward pass; it
holds a device slot), then ``finish`` (CPU work and answers; the device slot is free again). When a batch
forms: at most ``max_in_flight`` batches are in the pipeline, and at most ``device_slots`` of them are in
their device step. With one device slot the next batch forms the moment the device frees, so it holds
everything that queued during the last forward pass, while the last batch's CPU stages (search, fusion,
ranking, answering) overlap the next one's forward pass. With two, the next batch forms as soon as a
pipeline slot frees and waits behind the running one: smaller batches, but no gap on the device between
them. See :func:`device_slots`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from server.batching.scheduler import (ACTIVE_WINDOW_MS, active_tenants, admit, hold_last_slot_ns, next_batch,
                                      tenant_caps)
from server.errors import DeadlineExceeded, NotReady, Overloaded

log = logging.getLogger(__name__)

T = TypeVar("T")
S = TypeVar("S")


@dataclass(eq=False)
class Entry(Generic[T]):
    tenant_id: str
    tokens: int
    deadline_ns: int | None
    payload: T
    future: asyncio.Future[Any]
    enqueued_ns: int = field(default_factory=time.monotonic_ns)
    started_ns: int = 0
    origin_ns: int = 0   # when its request arrived (before the queue); 0: at enqueue

    def __post_init__(self) -> None:
        if not self.origin_ns:
            self.origin_ns = self.enqueued_ns

    def cancelled(self) -> bool:
        return self.future.cancelled()

    def resolve(self, value: Any) -> None:
        if not self.future.done():
            self.future.set_result(value)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


@dataclass
class BatcherStats:
    batches: int = 0
    items: int = 0
    dropped: int = 0
    rejected: int = 0

    @property
    def mean_batch_size(self) -> float:
        return self.items / self.batches if self.batches else 0.0


class Stage(Generic[T, S]):
    """What a batcher runs, step by step. ``device`` runs the batch's forward pass and returns what
    ``finish`` needs; ``finish`` does the rest and resolves every entry (an entry ``device`` resolved is
    left alone). ``shape`` decides per-batch settings as the batch forms, from the queue behind it and
    ``others``, the batches already in the pipeline (0 with an empty queue: this batch runs alone)."""

    def shape(self, batch: list[Entry[T]], queued: list[Entry[T]], now_ns: int, *, others: int = 0) -> None:
        return None

    async def device(self, batch: list[Entry[T]]) -> S:
        raise NotImplementedError

    async def finish(self, batch: list[Entry[T]], state: S) -> None:
        return None


MAX_BATCH_TOKENS = 16384   # padded tokens (longest × count) of a search batch; a write batch takes 4×
MAX_WAIT_MS = 2.0          # how long a forming batch waits for stragglers while an earlier one is on the device


def split_at(active: int, *, split_above: int, max_requests: int) -> int:
    """The most requests the next batch takes: half of the ``active`` ones (submitted and not answered: queued
    or in the pipeline), rounded up, and never fewer than ``split_above`` (0: ``max_requests``). A closed loop
    of clients otherwise bunches into one cohort: every client in one batch, its CPU stages with the device
    idle, its clients back all at once (32 clients, 1 x 10k, reranker loaded: mean batches of 27-29 at
    120-133 QPS against 16-21 at 145-167 in other runs of the same build). Two cohorts of half the clients
    alternate: one on the device while the other is in its CPU stages. Past ~16 queries the forward pass
    costs the same per query (e5-small, 2-core CPU: 4.66 ms at 17, 4.67 at 32), so the cap costs no device time."""
    if split_above <= 0:
        return max_requests
    return min(max_requests, max(split_above, (active + 1) // 2))


def device_slots(max_requests: int, threads: int = 1) -> int:
    """Batches in their device step at once. With one device thread: one slot when batches can grow (bigger
    batches beat a gap-free device: 1 x 10k, 32 clients, batched, two alternating probe pairs 393.4 / 391.2 vs
    367.3 / 371.8 QPS with mean batches of 18-20 vs 12.5); two when every batch is one request (the size cannot
    grow, so keep the device fed: 126 / 135 vs 117 / 119 QPS). With ``threads`` device threads (server/app.py
    ``device_threads``), one slot each, and never fewer than two for one-request batches."""
    if max_requests > 1:
        return max(1, threads)
    return max(2, threads)


def max_in_flight(max_requests: int, threads: int = 1) -> int:
    """Batches in the pipeline at once: one in its CPU stages beside each device thread's (one device thread:
    2, the one on the device and the one finishing); one-request batches: at least their two device slots."""
    return max(device_slots(max_requests, threads), max(1, threads) + 1)


class Batcher(Generic[T]):
    """Groups submitted payloads into batches run by a :class:`Stage` (which resolves every entry)."""

    def __init__(self, *, name: str, stage: Stage[T, Any], max_tokens: int, max_requests: int, max_wait_ms: float,
                 capacity: int, max_in_flight: int = 2, device_slots: int = 1,
                 tenant_weights: Mapping[str, float] | None = None, tenant_quantum: int = 0,
                 split_above: int = 0) -> None:
        self.name = name
        self._stage = stage
        self.max_tokens = max_tokens
        self.max_requests = max_requests
        self.max_wait_s = max_wait_ms / 1000.0
        self.capacity = capacity
        self.tenant_weights = dict(tenant_weights or {})   # fair share (scheduler.py); absent: weight 1
        self.tenant_quantum = tenant_quantum                # entries per tenant per contended batch; 0 = no cap
        self.split_above = split_above                      # split_at; 0 = never split
        self._queue: list[Entry[T]] = []
        self._queued: Counter[str] = Counter()      # per tenant: entries in _queue
        self._in_flight: Counter[str] = Counter()   # per tenant: submitted and not yet answered
        self.tenant_rejected: Counter[str] = Counter()
        self._arrived = asyncio.Event()
        self._changed = asyncio.Event()   # an arrival or a batch leaving the pipeline (a held slot decides again)
        self._max_in_flight = max_in_flight
        self._device_count = min(device_slots, max_in_flight)
        self._batches = 0   # batches in the pipeline
        self._slots = asyncio.Semaphore(max_in_flight)
        self._device_slots = asyncio.Semaphore(min(device_slots, max_in_flight))
        self._in_device = 0   # batches formed and not yet past their device stage
        self._last_done_ns = -(1 << 62)   # when a request was last answered (active_within)
        self._answered_ns: dict[str, int] = {}   # per tenant: when its last request was answered (fair share)
        self.active_window_ns = int(ACTIVE_WINDOW_MS * 1e6)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._closed = False
        self.stats = BatcherStats()

    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name=f"batcher-{self.name}")

    @property
    def depth(self) -> int:
        return len(self._queue)

    def active_within(self, window_ns: int) -> bool:
        """Whether a request is queued or in the pipeline, or one was answered in the last ``window_ns``: a client
        in a closed loop has a gap of a few ms between its answer and its next request."""
        return bool(self._in_flight) or time.monotonic_ns() - self._last_done_ns < window_ns

    def tenant_depths(self) -> dict[str, tuple[int, int]]:
        """(queued, rejected) per tenant that has either."""
        return {t: (self._queued[t], self.tenant_rejected[t])
                for t in set(+self._queued) | set(+self.tenant_rejected)}

    def forget_tenant(self, tenant_id: str) -> None:
        self.tenant_rejected.pop(tenant_id, None)

    def _reject(self, tenant_id: str, why: str) -> Overloaded:
        self.stats.rejected += 1
        self.tenant_rejected[tenant_id] += 1
        return Overloaded(f"{self.name} queue: {why}; retry later")

    async def submit(self, *, tenant_id: str, tokens: int, payload: T, deadline_ns: int | None,
                     origin_ns: int = 0) -> Any:
        if self._closed:
            raise NotReady("the server is shutting down")
        verdict = admit(self._queued, tenant_id, capacity=self.capacity, weights=self.tenant_weights)
        if not verdict.accept:
            full = sum(self._queued.values()) >= self.capacity
            raise self._reject(tenant_id, f"full ({self.capacity})" if full and len(+self._queued) <= 1
                               else "this tenant's share of it is full")
        if deadline_ns is not None and deadline_ns <= time.monotonic_ns():
            raise DeadlineExceeded("deadline passed before the request was queued")
        if verdict.push_out is not None:   # room for a tenant within its share: the newest of one over it goes
            at = max(i for i, e in enumerate(self._queue) if e.tenant_id == verdict.push_out)
            pushed = self._queue.pop(at)
            self._queued[pushed.tenant_id] -= 1
            pushed.fail(self._reject(pushed.tenant_id, "this tenant's share of it is full"))
        entry: Entry[T] = Entry(tenant_id=tenant_id, tokens=max(1, tokens), deadline_ns=deadline_ns,
                                payload=payload, future=asyncio.get_running_loop().create_future(),
                                origin_ns=origin_ns)
        self._queue.append(entry)
        self._queued[tenant_id] += 1
        self._in_flight[tenant_id] += 1
        self._arrived.set()
        self._changed.set()
        try:
            return await entry.future
        finally:
            self._last_done_ns = self._answered_ns[tenant_id] = time.monotonic_ns()
            self._in_flight[tenant_id] -= 1
            if self._in_flight[tenant_id] <= 0:
                del self._in_flight[tenant_id]

    async def _loop(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while self._queue:
                await self._slots.acquire()
                hold_ns = self._hold_ns()
                if hold_ns > 0:   # the last slot is kept for a quiet client between its queries
                    self._slots.release()
                    self._changed.clear()
                    try:
                        await asyncio.wait_for(self._changed.wait(), timeout=hold_ns / 1e9)
                    except TimeoutError:
                        pass
                    continue
                await self._device_slots.acquire()
                if self.max_wait_s > 0 and self._in_device > 0:
                    await self._gather_stragglers()
                caps = tenant_caps(self._queued, active=self._active_tenants(), weights=self.tenant_weights,
                                   quantum=self.tenant_quantum, max_requests=self.max_requests)
                limit = split_at(sum(self._in_flight.values()), split_above=self.split_above,
                                 max_requests=self.max_requests)
                plan = next_batch(self._queue, max_tokens=self.max_tokens, max_requests=limit,
                                  now_ns=time.monotonic_ns(), caps=caps)
                self._queue = plan.remaining
                self._queued = Counter(e.tenant_id for e in self._queue)
                for entry in plan.dropped:
                    self.stats.dropped += 1
                    entry.fail(DeadlineExceeded("deadline passed while queued"))
                if not plan.batch:
                    self._device_slots.release()
                    self._slots.release()
                    continue
                self._stage.shape(plan.batch, self._queue, time.monotonic_ns(), others=len(self._tasks))
                self._in_device += 1
                self._batches += 1
                task = asyncio.get_running_loop().create_task(self._run(plan.batch))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _hold_ns(self) -> int:
        """How long the slot just taken stays empty (0: a batch forms): only when the batch would take the pipeline's
        last free slot or, with several device slots, the last free one of those (scheduler.hold_last_slot_ns). With
        one device slot a batch forms only once the device is free, so a query that arrived by then is in it."""
        last_device = self._device_count > 1 and self._in_device >= self._device_count - 1
        if self._batches == 0 or self.tenant_quantum <= 0 or not (
                last_device or self._batches >= self._max_in_flight - 1):
            return 0
        running = {t: n - self._queued[t] for t, n in self._in_flight.items()}
        return hold_last_slot_ns(+self._queued, running=running, in_flight=self._in_flight,
                                 answered_ns=self._answered_ns, now_ns=time.monotonic_ns(),
                                 window_ns=self.active_window_ns)

    def _active_tenants(self) -> int:
        """Tenants queued, in flight or answered within ``active_window_ns`` (forgetting older answers)."""
        now = time.monotonic_ns()
        active = active_tenants(self._in_flight, self._answered_ns, now_ns=now, window_ns=self.active_window_ns)
        for t in [t for t in self._answered_ns if t not in active]:
            del self._answered_ns[t]
        return len(active)

    async def _gather_stragglers(self) -> None:
        """The device is busy anyway: let arrivals join this batch until it is full or ``max_wait``
        has passed (never when the device is idle: the caller checks)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self.max_wait_s
        while len(self._queue) < self.max_requests:
            left = until - loop.time()
            if left <= 0:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout=left)
            except TimeoutError:
                break
        self._arrived.clear()

    async def _run(self, batch: list[Entry[T]]) -> None:
        now = time.monotonic_ns()
        for entry in batch:
            entry.started_ns = now
        self.stats.batches += 1
        self.stats.items += len(batch)
        on_device = True
        try:
            state = await self._stage.device(batch)
            on_device = False
            self._leave_device()
            await self._stage.finish(batch, state)
        except Exception as exc:  # a failed batch fails only its own requests
            log.exception("%s batch of %d failed", self.name, len(batch))
            for entry in batch:
                entry.fail(exc)
        finally:
            if on_device:
                self._leave_device()
            self._batches -= 1
            self._slots.release()
            self._changed.set()

    def _leave_device(self) -> None:
        self._in_device -= 1
        self._device_slots.release()

    async def close(self) -> None:
        """Stops taking work, lets running batches finish, fails what is still queued."""
        self._closed = True
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass
        for entry in self._queue:
            entry.fail(NotReady("the server is shutting down"))
        self._queue.clear()
        self._queued.clear()
