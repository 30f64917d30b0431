"""A shard's Lucene index and what keeps it usable through a full disk (owned by the shard; every call that
changes it runs under the shard's write lock).

Lucene closes its IndexWriter when a flush meets ENOSPC, so a lexical failure after a durable commit marks
the index stale: searches keep its last reader, writes skip it (the rebuild reads the store, so nothing is
lost), and :meth:`LexicalSlot.repair` rebuilds it from the store once space returns — not before a backoff
(1 s doubling to a minute) after a rebuild that met a full disk again (retried every flush interval on a
disk that stayed full, a rebuild holding the write lock starved writes: found by the tmpfs test).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from server.domain import Memory
from server.errors import is_storage_full
from server.lexical.lucene import LuceneIndex
from server.text import memory_text

log = logging.getLogger(__name__)

LEXICAL_BYTES_PER_MEMORY = 400      # a rebuilt Lucene index on disk, conservative (thresholds.py's short texts: 38)
REPAIR_BACKOFF_S = (1.0, 60.0)      # after a rebuild that met a full disk: first wait, longest wait
LEXICAL_SWAP_WAIT_S = 30.0          # a search waits at most this for a repair's swap (measured: tens of ms)


class LexicalSlot:
    def __init__(self, tenant_id: str, directory: Path, index: LuceneIndex) -> None:
        self.tenant_id = tenant_id
        self.directory = directory
        self._index = index
        self._ready = threading.Event()   # cleared while a repair swaps the index (see ``index``)
        self._ready.set()
        self.committed_seq = index.committed_seq()
        self.stale = False                # a write met a full disk: rebuild once space returns
        self._changed = False             # documents written since the last commit
        self._failures = 0
        self._after_s = 0.0               # monotonic: no rebuild before (a backoff after a failed one)

    @property
    def index(self) -> LuceneIndex:
        """The Lucene index. While a repair swaps it (the stale one closed, the new one not yet open) a
        search waits here, briefly, instead of meeting a closed index (LexicalIndexClosedError)."""
        self._ready.wait(LEXICAL_SWAP_WAIT_S)
        return self._index

    def write(self, puts: Sequence[Memory], doomed: Sequence[int]) -> None:
        if self.stale:
            return   # the rebuild reads the store: nothing is lost by skipping
        try:
            self._changed = self._changed or bool(puts or doomed)
            if puts:
                self.index.upsert([(m.doc_id, memory_text(m)) for m in puts], refresh=False)
            if doomed:
                self.index.delete(doomed, refresh=False)
            self.index.refresh()
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            self.lost(exc)

    def lost(self, exc: BaseException) -> None:
        self.stale = True
        log.warning("tenant %s: the lexical index met a full disk (%s); it is rebuilt from the store once space "
                    "returns (searches use its last state meanwhile)", self.tenant_id, str(exc).splitlines()[0][:200])

    def commit(self, seq: int, *, force: bool = True) -> bool:
        """Commits Lucene at ``seq``; False when it could not (stale, or the disk is full). Without ``force``,
        only when documents changed since the last commit: a seq moved by access records alone (every search
        records uses) changes nothing Lucene holds, and a restart replays only the log's lexical ops past the
        commit. The periodic flush of 100 tenants otherwise committed (and fsynced) each of them every 5 s:
        6.5 % of a 2-core server's samples at 32 clients (README "Serving benchmark")."""
        if self.stale:
            return False
        if not force and not self._changed:
            return True
        if self.committed_seq != seq:
            try:
                self.index.commit(seq)
            except Exception as exc:
                if not is_storage_full(exc):
                    raise
                self.lost(exc)
                return False
            self.committed_seq = seq
        self._changed = False
        return True

    @staticmethod
    def rebuild_bytes(memories: int) -> int:
        """About the disk a rebuild writes (its new segments, beside the last commit's)."""
        return (1 << 20) + LEXICAL_BYTES_PER_MEMORY * memories

    def repair_due(self) -> bool:
        return self.stale and time.monotonic() >= self._after_s

    def repair(self, memories: Iterable[Memory], seq: int) -> bool:
        """Rebuilds a stale index from ``memories`` (the store's, at ``seq``). The IndexWriter Lucene closed
        on ENOSPC keeps the directory's write lock, so the old index closes first (waiting for the searches
        that hold its reader) and the fresh one, opened at the last commit, is swapped in at once (searches
        read that commit meanwhile), then rebuilt. On another full disk it stays stale and the next try
        waits a backoff."""
        if not self.stale:
            return False
        self._ready.clear()
        try:
            try:
                self._index.close()
            except Exception as exc:  # noqa: BLE001 - its writer is already closed; nothing of it is needed
                log.info("tenant %s: closing the stale lexical index failed (%s)", self.tenant_id,
                         str(exc).splitlines()[0][:200])
            self._index = LuceneIndex.open(self.directory / "lucene")
        finally:
            self._ready.set()
        try:
            self.index.delete_all(refresh=False)
            self.index.upsert([(m.doc_id, memory_text(m)) for m in memories], refresh=False)
            self.index.refresh()
            self.index.commit(seq)
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            wait_s = min(REPAIR_BACKOFF_S[1], REPAIR_BACKOFF_S[0] * 2 ** self._failures)
            self._failures += 1
            self._after_s = time.monotonic() + wait_s
            log.warning("tenant %s: the lexical rebuild met a full disk again; next try in %.0fs", self.tenant_id, wait_s)
            return False
        self.committed_seq = seq
        self.stale = False
        self._failures, self._after_s = 0, 0.0
        return True

    def close(self) -> None:
        try:
            self.index.close()
        except Exception:
            if not self.stale:
                raise
