"""The pair-score cache: a (query, memory) pair the cross-encoder scored recently is not scored again.

A logit is a pure function of the model and the two texts it reads: the query text and the memory's
indexed text (content, the entities it does not name, the date of an episodic memory, its context;
``server.text.memory_text``). The key is those two texts (a 16-byte BLAKE2b digest of them), so the
memory's version is in the key: any write that changes what the cross-encoder reads (a merge adding an
entity, a re-threaded context, an edit) makes a different key, and the old entry can never answer again
(it ages out of the LRU). A write that changes nothing the model reads (a touch, an importance change)
keeps the logit, which is still the right one. Deleted or filtered memories never reach the reranker,
so they are never looked up.

Entries are scoped per tenant (one tenant's texts can never be observed through another's latency) and
``forget_tenant`` drops a tenant's. Looked up and filled on executor threads: a lock guards the LRU.
Bounded by ``PAIR_CACHE_ENTRIES`` (0 = off).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

Key = tuple[str, bytes]


PAIR_CACHE_ENTRIES = 65536   # (query, memory text) pairs kept, LRU over every tenant (a key and a float each)


def pair_key(tenant_id: str, query: str, text: str) -> Key:
    digest = hashlib.blake2b(query.encode(), digest_size=16)
    digest.update(b"\x00")
    digest.update(text.encode())
    return tenant_id, digest.digest()


class PairScoreCache:
    def __init__(self, *, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Key, float] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get_many(self, keys: Sequence[Key]) -> list[float | None]:
        if not self.enabled:
            return [None] * len(keys)
        out: list[float | None] = []
        with self._lock:
            for key in keys:
                found = self._entries.get(key)
                if found is not None:
                    self._entries.move_to_end(key)
                out.append(found)
            hits = sum(v is not None for v in out)
            self.hits += hits
            self.misses += len(out) - hits
        return out

    def put_many(self, keys: Sequence[Key], logits: Sequence[float]) -> None:
        if not self.enabled:
            return
        with self._lock:
            for key, logit in zip(keys, logits, strict=True):
                self._entries[key] = float(logit)
                self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget_tenant(self, tenant_id: str) -> int:
        with self._lock:
            doomed = [key for key in self._entries if key[0] == tenant_id]
            for key in doomed:
                del self._entries[key]
        return len(doomed)
