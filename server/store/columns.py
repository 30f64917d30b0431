"""The fields that filtering and ranking read, as NumPy columns indexed by doc id.

A search looks at a few hundred candidates per query: checking each one's status, expiry, type and
times through its ``Memory`` object costs a dict lookup and a dozen attribute reads in Python, per
candidate, while holding the GIL. The store keeps these columns beside its maps (updated in the same
``_apply``), so the search pipeline masks and gathers a whole candidate list with a few array
operations and builds ``Memory`` objects only for the hits it returns.

Readers take no lock. A writer sets one row at a time; growing replaces the whole column set at once
(``DocColumns.view`` hands out one consistent set), so a reader sees a row either before or after a
change, never an array of the wrong length. A reader racing a purge may see a row that the store's
maps no longer hold: the pipeline resolves hits through the maps and drops such rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from server.domain import Filter, Memory, MemoryStatus

LIVE = (int(MemoryStatus.ACTIVE), int(MemoryStatus.PENDING))
UPDATED_BY = 1   # links: a newer memory updates this one
UPDATES = 2      # links: this memory updates an older one


@dataclass(frozen=True)
class Columns:
    """One consistent set of columns; row ``d`` describes doc id ``d`` (``status`` 0: no such memory)."""

    status: np.ndarray        # int8, MemoryStatus value, 0 = absent
    type: np.ndarray          # int8, MemoryType value
    pinned: np.ndarray        # bool
    importance: np.ndarray    # float64 (as stored: the weight is computed in float64, then cast)
    created_ms: np.ndarray    # int64
    last_access_ms: np.ndarray  # int64
    expires_ms: np.ndarray    # int64, 0 = never
    access_count: np.ndarray  # int64: recorded uses (what the ranking's access boost reads)
    links: np.ndarray         # int8: UPDATED_BY | UPDATES bits (server/engine/updates.py; what the update factor reads)

    def __len__(self) -> int:
        return int(self.status.shape[0])


def _empty(n: int) -> Columns:
    return Columns(status=np.zeros(n, np.int8), type=np.zeros(n, np.int8), pinned=np.zeros(n, np.bool_),
                   importance=np.zeros(n, np.float64), created_ms=np.zeros(n, np.int64),
                   last_access_ms=np.zeros(n, np.int64), expires_ms=np.zeros(n, np.int64),
                   access_count=np.zeros(n, np.int64), links=np.zeros(n, np.int8))


class DocColumns:
    def __init__(self, capacity: int = 1024) -> None:
        self._cols = _empty(max(1, capacity))

    def view(self) -> Columns:
        return self._cols

    def set(self, memory: Memory) -> None:
        d = memory.doc_id
        cols = self._cols
        if d >= len(cols):
            cols = self._grow(d + 1)
        # status last: a row becomes visible only once its other fields are written
        cols.type[d] = int(memory.type)
        cols.pinned[d] = memory.pinned
        cols.importance[d] = memory.importance
        cols.created_ms[d] = memory.created_at_ms
        cols.last_access_ms[d] = memory.last_access_at_ms
        cols.expires_ms[d] = memory.expires_at_ms
        cols.access_count[d] = memory.access_count
        cols.links[d] = (UPDATED_BY if memory.updated_by else 0) | (UPDATES if memory.updates else 0)
        cols.status[d] = int(memory.status)

    def clear(self, doc_id: int) -> None:
        cols = self._cols
        if 0 <= doc_id < len(cols):
            cols.status[doc_id] = 0

    def _grow(self, need: int) -> Columns:
        old = self._cols
        n = len(old)
        while n < need:
            n *= 2
        new = _empty(n)
        for name in Columns.__dataclass_fields__:
            getattr(new, name)[: len(old)] = getattr(old, name)
        self._cols = new
        return new


def columnar(f: Filter) -> bool:
    """True when every condition of ``f`` is one of the columns (scope, key and entities are not)."""
    return f.scope is None and f.key is None and not f.entities_any and not f.entities_all


def keep_mask(cols: Columns, ids: np.ndarray, f: Filter, statuses: frozenset[MemoryStatus], now_ms: int) -> np.ndarray:
    """Which of ``ids`` (int64; negatives are padding) name a memory that passes ``f`` with the effective
    status set ``statuses``; the vectorised twin of ``Filter.matches`` for a :func:`columnar` filter.
    A live memory past its expiry at ``now_ms`` counts as EXPIRED."""
    inside = (ids >= 0) & (ids < len(cols))
    rows = np.where(inside, ids, 0)
    status = cols.status[rows].astype(np.int16)
    ok = inside & (status != 0)
    if now_ms:
        expires = cols.expires_ms[rows]
        lapsed = (expires != 0) & (expires <= now_ms) & ((status == LIVE[0]) | (status == LIVE[1]))
        status = np.where(lapsed, int(MemoryStatus.EXPIRED), status)
    if statuses:
        ok &= np.isin(status, np.fromiter((int(s) for s in statuses), np.int16))
    if f.types:
        ok &= np.isin(cols.type[rows], np.fromiter((int(t) for t in f.types), np.int8))
    if f.created_after_ms:
        ok &= cols.created_ms[rows] >= f.created_after_ms
    if f.created_before_ms:
        ok &= cols.created_ms[rows] < f.created_before_ms
    if f.accessed_after_ms:
        ok &= cols.last_access_ms[rows] >= f.accessed_after_ms
    if f.accessed_before_ms:
        ok &= cols.last_access_ms[rows] < f.accessed_before_ms
    if f.min_importance is not None:
        ok &= cols.importance[rows] >= f.min_importance
    return ok
