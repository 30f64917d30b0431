"""Access bookkeeping, batched: being returned by a search updates a memory's ``last_access_at_ms`` and
``access_count`` and nudges its importance (bounded), without one disk write per hit.

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

from server.domain import Memory, MemoryStatus, is_expired


@dataclass
class Touch:
    last_ms: int = 0
    count: int = 0


def nudged(importance: float, times: int, *, step: float, cap: float) -> float:
    """``importance`` after ``times`` accesses: +step each, never above ``cap`` and never lowered."""
    if importance >= cap or step <= 0 or times <= 0:
        return importance
    return min(cap, importance + step * times)


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

    def overlay(self, memory: Memory, *, step: float, cap: float) -> Memory:
        """``memory`` as it will read once the pending touches are flushed (Get shows this)."""
        t = self.pending(memory.memory_id)
        return memory if t is None else touched(memory, t, step=step, cap=cap)

    def drain(self, get: Callable[[str], Memory | None], *, now_ms: int, step: float, cap: float) -> tuple[list[Memory], list[Memory]]:
        """Takes everything recorded so far; returns (updated memories, those of them newly EXPIRED).
        Memories that are gone (purged) are skipped, never recreated. Call under the write lock."""
        with self._lock:
            touches, self._touches = self._touches, {}
            expired, self._expired = self._expired, set()
        updates: dict[str, Memory] = {}
        for memory_id, t in touches.items():
            memory = get(memory_id)
            if memory is not None:
                updates[memory_id] = touched(memory, t, step=step, cap=cap)
        newly_expired: list[Memory] = []
        for memory_id in expired:
            memory = updates.get(memory_id) or get(memory_id)
            if memory is not None and is_expired(memory, now_ms):
                memory = dataclasses.replace(memory, status=MemoryStatus.EXPIRED, updated_at_ms=now_ms)
                updates[memory_id] = memory
                newly_expired.append(memory)
        return list(updates.values()), newly_expired


def touched(memory: Memory, t: Touch, *, step: float, cap: float) -> Memory:
    return dataclasses.replace(
        memory, last_access_at_ms=max(memory.last_access_at_ms, t.last_ms), access_count=memory.access_count + t.count,
        importance=nudged(memory.importance, t.count, step=step, cap=cap))

