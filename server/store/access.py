"""Access bookkeeping, batched: a use (a search hit that entered the context, or a Touch) updates a
memory's ``last_access_at_ms`` and ``access_count``, without one disk write per hit. Importance stays the
writer's: the access boost is computed at ranking time from these two fields (:func:`access_boost`), so
it is bounded and fades when the memory stops being used.

Searches ``record`` into an in-memory buffer per shard (a dict update under a lock, on the caller's
thread). ``drain`` turns everything recorded since the last drain into updated memories, which the
caller commits as ONE log group under the tenant's write lock (the periodic flush and shutdown do this).
Lazily found expiries ride in the same group. What is not yet drained is lost on a crash: access
statistics are a ranking signal, not data, and at most one flush interval of them is at stake.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from server.domain import Memory, MemoryStatus, is_expired


@dataclass
class Touch:
    last_ms: int = 0
    count: int = 0


def access_boost_inputs(importance: np.ndarray, access_count: np.ndarray, *, weight: float, step: float,
                        cap: float) -> tuple[np.ndarray, np.ndarray]:
    """The ranking kernel's ``(boost, weight_cap)`` for the importance factor ``(1 - w) + w * importance``:
    each recorded use adds ``step`` to the importance the ranking reads, times the recency decay since the
    last use (the kernel applies it, so the boost fades back), never lifting it above ``cap`` nor lowering it."""
    boost = weight * step * np.asarray(access_count, dtype=np.float64)
    weight_cap = (1.0 - weight) + weight * np.maximum(cap, np.asarray(importance, dtype=np.float64))
    return boost, weight_cap


class TouchBuffer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._touches: dict[str, Touch] = {}
        self._expired: set[str] = set()

    def record(self, memory_ids: Iterable[str], *, now_ms: int) -> None:
        with self._lock:
            for memory_id in memory_ids:
                t = self._touches.get(memory_id)
                if t is None:
                    t = self._touches[memory_id] = Touch()
                t.last_ms = max(t.last_ms, now_ms)
                t.count += 1

    def expired(self, memory_ids: Iterable[str]) -> None:
        with self._lock:
            self._expired.update(memory_ids)

    def pending(self, memory_id: str) -> Touch | None:
        with self._lock:
            t = self._touches.get(memory_id)
            return None if t is None else Touch(t.last_ms, t.count)

    def __len__(self) -> int:
        with self._lock:
            return len(self._touches) + len(self._expired)

    def overlay(self, memory: Memory) -> Memory:
        """``memory`` as it will read once the pending touches are flushed (Get shows this)."""
        t = self.pending(memory.memory_id)
        return memory if t is None else touched(memory, t)

    def drain(self, get: Callable[[str], Memory | None], *, now_ms: int) -> tuple[list[Memory], list[Memory]]:
        """Takes everything recorded so far; returns (updated memories, those of them newly EXPIRED).
        Memories that are gone (purged) are skipped, never recreated. Call under the write lock."""
        with self._lock:
            touches, self._touches = self._touches, {}
            expired, self._expired = self._expired, set()
        updates: dict[str, Memory] = {}
        for memory_id, t in touches.items():
            memory = get(memory_id)
            if memory is not None:
                updates[memory_id] = touched(memory, t)
        newly_expired: list[Memory] = []
        for memory_id in expired:
            memory = updates.get(memory_id) or get(memory_id)
            if memory is not None and is_expired(memory, now_ms):
                memory = dataclasses.replace(memory, status=MemoryStatus.EXPIRED, updated_at_ms=now_ms)
                updates[memory_id] = memory
                newly_expired.append(memory)
        return list(updates.values()), newly_expired


def touched(memory: Memory, t: Touch) -> Memory:
    return dataclasses.replace(
        memory, last_access_at_ms=max(memory.last_access_at_ms, t.last_ms), access_count=memory.access_count + t.count)

