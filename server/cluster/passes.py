"""A model replica's forward passes, formed from the callers waiting when a pass starts and run on one caller's
own thread: no queue thread, no event loop between a direct forward's connection and the model.

The first caller to find no pass running leads: it takes what waits (up to ``max_requests`` callers, oldest
first, :func:`next_requests`), runs the pass and hands every caller its rows; it leads again while its own
request is not done, then wakes the oldest waiting caller to lead the next pass, so no caller runs passes for
others after its own is answered. One pass at a time, as ``@serve.batch`` ran them; a pass that raises fails
only its own callers.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class Waiting:
    """One caller's request: its items and traces in, its rows (or the pass's error) out."""

    __slots__ = ("done", "error", "items", "rows", "traces", "woken")

    def __init__(self, items: Sequence[Any], traces: Sequence[dict[str, str]]) -> None:
        self.items = items
        self.traces = traces
        self.rows: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False
        self.woken = threading.Event()   # set when answered, or when it is to lead the next pass


def next_requests(queue: deque[Waiting], *, max_requests: int) -> list[Waiting]:
    """The requests of the next pass: the oldest ``max_requests`` waiting (removed from ``queue``)."""
    return [queue.popleft() for _ in range(min(max_requests, len(queue)))]


class Passes:
    """``run(items, traces)`` from any number of threads; ``forward(requests) -> rows per request`` runs one
    pass over them (only ever one at a time)."""

    def __init__(self, forward: Callable[[list[Waiting]], Sequence[np.ndarray]], *, max_requests: int) -> None:
        self._forward = forward
        self._max = max_requests
        self._lock = threading.Lock()
        self._queue: deque[Waiting] = deque()
        self._leading = False

    def run(self, items: Sequence[Any], traces: Sequence[dict[str, str]] = ()) -> np.ndarray:
        me = Waiting(items, traces)
        with self._lock:
            self._queue.append(me)
            lead = not self._leading
            self._leading = True
        if not lead:
            me.woken.wait()
            lead = not me.done   # woken to lead the next pass, not answered
        if lead:
            while not me.done:
                with self._lock:
                    requests = next_requests(self._queue, max_requests=self._max)
                self._pass(requests)
            with self._lock:   # hand the lead over, or put it down
                if self._queue:
                    self._queue[0].woken.set()
                else:
                    self._leading = False
        if me.error is not None:
            raise me.error
        assert me.rows is not None
        return me.rows

    def _pass(self, requests: list[Waiting]) -> None:
        try:
            rows = self._forward(requests)
        except BaseException as exc:  # noqa: BLE001 - the pass's own callers get it; the next pass still runs
            for r in requests:
                r.error = exc
        else:
            for r, out in zip(requests, rows, strict=True):
                r.rows = out
        for r in requests:
            r.done = True
            r.woken.set()
