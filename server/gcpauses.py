"""Python's cyclic garbage collector against a server that holds a million long-lived objects.

A loaded tenant of 10k memories holds ~11k objects the collector tracks (its memories, their columns, the index
wrappers). CPython 3.11 runs a full (generation 2) collection each time the objects promoted since the last one
reach a quarter of those that survived it, and a full collection walks every tracked object with the GIL held:
nothing else in the process runs meanwhile. Measured on the 100 × 10k serving dataset (``python -m
benchmarks.serving.probe --dataset 100x10000 --clients 32``, a ``gc.callbacks`` log): 0.5–0.8 s a full
collection, one every ~2 s while the tenants loaded and one every ~30 s under load (0.97 and 0.62 s); the grid
at 32 clients had a p99 of 1,175 ms against a p95 of 192 ms.

Two settings fix it (``tenants.gc_tuning``, default on; false keeps Python's own):

- **A young generation of** :data:`YOUNG_THRESHOLD` **allocations** (Python's 700). A search allocates thousands of
  objects that live a few milliseconds; with 700 young collections come so often that much of what is in flight
  is promoted, fills the old generation and sets off the full collections. Alone (freezing off)
  it left one pass of 117 ms in 90 s at 100 x 10k, 32 clients, against 2-3 of 0.86-1.32 s.
- **Loaded tenants frozen.** A loaded shard's objects live until it is evicted, dropped or the server stops, and a
  closed shard is freed by reference counting alone, no collection needed (``tests/unit/server/test_gcpauses.py``).
  So after each load :func:`freeze_loaded` runs a young collection and moves every object then alive into the
  permanent generation (``gc.freeze``): full collections walk only what was allocated since. Alone it cut the
  passes to 0.11-0.22 s but not their number (searches replace the memories they touch with new objects, for their
  access counts); with the threshold: no pass of 100 ms or more in 90 s.

:class:`GcPauses` times every collection (``gc.callbacks``) for ``/metrics`` and logs the long ones.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

WARN_S = 0.1   # a collection at least this long is logged: it stalled every request in flight
YOUNG_THRESHOLD = 20_000   # allocations between young collections (Python's default 700)


def tune() -> None:
    """The young generation's threshold at :data:`YOUNG_THRESHOLD` (process-wide; the older ones keep theirs)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


_paused_lock = threading.Lock()
_paused_depth = 0          # loads inside paused() now
_enabled_before = False    # whether the collector was on when the outermost of them began


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off while a tenant loads, back on (as it was) when the last concurrent load ends.

    A load builds a million long-lived objects (a 1M-memory tenant: its log's record metas, then its memories)
    and nothing it allocates is cyclic garbage, yet the collector walks the growing heap again and again: with it
    on, parsing 111k record metas of such a log took 2.7 s, with it off 1.0 s (one process, same bytes). What the
    load leaves is frozen right after (:func:`freeze_loaded`), so the next full pass does not walk it either.
    Other threads' cyclic garbage of those seconds waits for the first collection after; reference counting
    still frees everything else."""
    global _paused_depth, _enabled_before
    with _paused_lock:
        _paused_depth += 1
        if _paused_depth == 1:
            _enabled_before = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _paused_lock:
            _paused_depth -= 1
            if _paused_depth == 0 and _enabled_before:
                gc.enable()


def freeze_loaded() -> int:
    """A young collection (generations 0 and 1: cheap), then ``gc.freeze()``; returns the frozen object count."""
    gc.collect(1)
    gc.freeze()
    return gc.get_freeze_count()


class GcPauses:
    """Counts and times the collector's passes by generation, from :meth:`install` until :meth:`close`."""

    def __init__(self) -> None:
        # No lock: the callback runs inside a collection, which any allocation may start, so a lock held around
        # an allocation elsewhere would deadlock it; the GIL orders these updates.
        self._started = 0.0
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.longest = [0.0, 0.0, 0.0]

    @classmethod
    def install(cls) -> GcPauses:
        pauses = cls()
        gc.callbacks.append(pauses._callback)
        return pauses

    def close(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        # Runs with the GIL held, inside the collection: arithmetic, and a log line for a long pass.
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = int(info.get("generation", 2))
        if not 0 <= generation <= 2 or self._started == 0.0:
            return
        seconds = time.perf_counter() - self._started
        self.collections[generation] += 1
        self.seconds[generation] += seconds
        self.longest[generation] = max(self.longest[generation], seconds)
        if seconds >= WARN_S:   # logging's locks are re-entrant
            log.warning("Python's garbage collector (generation %d) paused the process for %.0f ms (%d objects "
                        "frozen, tenants.gc_tuning)", generation, seconds * 1000, gc.get_freeze_count())

    def snapshot(self) -> dict[str, Any]:
        return {"collections": list(self.collections), "seconds": list(self.seconds),
                "longest_s": list(self.longest), "frozen_objects": gc.get_freeze_count()}
