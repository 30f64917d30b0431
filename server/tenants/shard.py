"""One tenant's data: its store, dense index and Lucene index, loaded together, changed together.

A shard only sees its own tenant's directory; there is no object that spans tenants.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from server.domain import Memory
from server.index.dense import FlatDenseIndex
from server.lexical.lucene import LuceneIndex
from server.store.memory_store import TenantStore

log = logging.getLogger(__name__)


class TenantShard:
    def __init__(self, tenant_id: str, directory: Path, store: TenantStore, dense: FlatDenseIndex,
                 lexical: LuceneIndex) -> None:
        self.tenant_id = tenant_id
        self.directory = directory
        self.store = store
        self.dense = dense
        self.lexical = lexical
        self.write_lock = threading.Lock()   # one writer per tenant; searches never take it
        self._lexical_seq = lexical.committed_seq()
        self.last_used_s = time.monotonic()

    @classmethod
    def load(cls, tenant_id: str, directory: Path, *, dim: int) -> TenantShard:
        started = time.perf_counter()
        store, replayed = TenantStore.open(directory, dim=dim)
        dense = FlatDenseIndex(dim)
        if replayed.vectors:
            ids = np.fromiter(replayed.vectors.keys(), dtype=np.int64, count=len(replayed.vectors))
            dense.add(ids, np.stack(list(replayed.vectors.values())))
        lexical = LuceneIndex.open(directory / "lucene")
        committed = lexical.committed_seq()
        if committed > store.seq:
            # The index claims changes the log does not hold: rebuild it from the store.
            log.warning("tenant %s: lexical index ahead of the log (%d > %d); rebuilding",
                        tenant_id, committed, store.seq)
            lexical.delete_all()
            committed = 0
            live = store.all()
            lexical.upsert([(m.doc_id, m.content) for m in live])
        else:
            _replay_lexical(lexical, [op for op in replayed.lexical_ops if op[0] > committed])
        lexical.refresh()
        lexical.commit(store.seq)
        log.info("tenant %s loaded: %d memories in %.3fs", tenant_id, len(store), time.perf_counter() - started)
        return cls(tenant_id, directory, store, dense, lexical)

    def apply(self, *, puts: Sequence[tuple[Memory, np.ndarray]] = (), updates: Sequence[Memory] = (),
              deletes: Sequence[str] = ()) -> int:
        """Durably commits a change, then makes it visible to dense and lexical search. Caller holds
        ``write_lock``."""
        doomed = [m.doc_id for m in (self.store.get(i) for i in deletes) if m is not None]
        seq = self.store.commit(puts=puts, updates=updates, deletes=deletes)
        if puts:
            self.dense.add([m.doc_id for m, _ in puts], np.stack([v for _, v in puts]))
            self.lexical.upsert([(m.doc_id, m.content) for m, _ in puts])
        if doomed:
            self.dense.remove(doomed)
            self.lexical.delete(doomed)
        if puts or doomed:
            self.lexical.refresh()
        return seq

    def flush(self) -> None:
        """Commits the Lucene index up to the store's sequence number (cheap when nothing changed)."""
        with self.write_lock:
            if self._lexical_seq != self.store.seq:
                self.lexical.commit(self.store.seq)
                self._lexical_seq = self.store.seq

    def close(self) -> None:
        self.flush()
        self.lexical.close()
        self.store.close()

    def ram_bytes(self) -> int:
        return self.dense.ram_bytes() + sum(len(m.content) * 2 + 600 for m in self.store.all())


def _replay_lexical(lexical: LuceneIndex, ops: list[tuple[int, str, int, str]]) -> None:
    batch: list[tuple[int, str]] = []
    for _, op, doc_id, text in ops:
        if op == "put":
            batch.append((doc_id, text))
            continue
        if batch:
            lexical.upsert(batch)
            batch = []
        lexical.delete([doc_id])
    if batch:
        lexical.upsert(batch)
