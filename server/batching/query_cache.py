"""The hot-path query-embedding cache: a repeated query text of the same tenant, within a short window,
reuses its embedding instead of queueing another forward pass.

What is cached is only the *embedding*, which depends on nothing but the text and the model, so no
write or delete can make an entry wrong: the search itself (dense, BM25, filters, decay) always runs
against the tenant's live indexes, and a write is visible to the very next search. Entries are still
scoped per tenant, so one tenant's queries can never be observed (say, through latency) by another,
and ``forget_tenant`` drops a tenant's entries (for a dropped tenant). Results are never cached: they
depend on the index contents and on the clock (decay), and would need invalidation on every write.

Used from the event loop only (no locks); bounded by entries (LRU) and by age (``ttl_ms``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import numpy as np


QUERY_CACHE_ENTRIES = 4096   # query embeddings kept (LRU, every tenant); batching.query_cache_ttl_ms bounds their age


class QueryEmbeddingCache:
    def __init__(self, *, ttl_ms: float, max_entries: int,
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.ttl_ns = int(ttl_ms * 1_000_000)
        self.max_entries = max_entries
        self._clock_ns = clock_ns
        self._entries: OrderedDict[tuple[str, str], tuple[int, np.ndarray]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.ttl_ns > 0 and self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, tenant_id: str, text: str) -> np.ndarray | None:
        if not self.enabled:
            return None
        key = (tenant_id, text)
        found = self._entries.get(key)
        if found is None or self._clock_ns() - found[0] > self.ttl_ns:
            if found is not None:
                del self._entries[key]
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return found[1]

    def put(self, tenant_id: str, text: str, vector: np.ndarray) -> None:
        if not self.enabled:
            return
        frozen = np.array(vector, dtype=np.float32, copy=True)
        frozen.setflags(write=False)
        self._entries[(tenant_id, text)] = (self._clock_ns(), frozen)
        self._entries.move_to_end((tenant_id, text))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def forget_tenant(self, tenant_id: str) -> int:
        doomed = [key for key in self._entries if key[0] == tenant_id]
        for key in doomed:
            del self._entries[key]
        return len(doomed)
