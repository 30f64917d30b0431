"""A shard's Lucene index and what keeps it usable through a full disk (owned by the shard; every call that
changes it runs under the shard's write lock).

Lucene closes its IndexWriter when a flush meets ENOSPC, so a lexical failure after a durable commit marks
the index stale: searches keep its last reader, writes skip it (the rebuild reads the store, so nothing is
lost), and :meth:`LexicalSlot.repair` rebuilds it from the store once space returns — not before a backoff
(1 s doubling to a minute) after a rebuild that met a full disk again (retried every flush interval on a
disk that stayed full, a rebuild holding the write lock starved writes: found by the tmpfs test).

A Write's documents are added under the write lock, but made visible to searches (Lucene's NRT refresh, ~22 ms
of a Write of 128 short turns on a 2-core EPYC: two thirds of Lucene's part of the commit) behind the Write's
acknowledgement, on a refresher thread (the refresh is JNI: the GIL is free meanwhile). The next query still
sees the Write: a search reads :meth:`LexicalSlot.searchable`, which asks the refresher for a refresh at once and
waits until every lexical write made before it is visible (refreshing itself when the refresher stopped).
Durability is untouched: a refresh only changes what searches see; the log holds every change and a load replays
it past Lucene's commit.

The refresher does not refresh after every Write of a stream: while another Write of the tenant is on its way
(:meth:`LexicalSlot.coming`: from its validation to its commit) or came in the last ``REFRESH_QUIET_S``, it waits,
for at most ``REFRESH_DELAY_S`` after the first write not yet visible, or until a search asks. Each refresh
flushes a segment and opens a reader, and the small segments are merged again: on a 2-core EPYC a refresh after
each Write of 128 short turns cost ~21 ms of CPU a Write (Lucene's merge threads included), one after every fourth
~10 ms (docs/benchmarks/ingest.md "A Write of 128 short turns with less CPU"). A Write with none behind it is
refreshed ``REFRESH_QUIET_S`` after its commit, as before but for that wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from server.domain import Memory
from server.errors import is_storage_full
from server.lexical.jvm import detach_current_thread
from server.lexical.lucene import LexicalIndexClosedError, LuceneIndex
from server.text import memory_text

log = logging.getLogger(__name__)

LEXICAL_BYTES_PER_MEMORY = 400      # a rebuilt Lucene index on disk, conservative (thresholds.py's short texts: 38)
REPAIR_BACKOFF_S = (1.0, 60.0)      # after a rebuild that met a full disk: first wait, longest wait
LEXICAL_SWAP_WAIT_S = 30.0          # a search waits at most this for a repair's swap (measured: tens of ms)
REFRESH_WAIT_S = 5.0                # ... and this for the refresher (~22 ms a Write of 128), then refreshes itself
REFRESH_QUIET_S = 0.03              # the refresher waits this long after a commit for the next Write to arrive ...
REFRESH_DELAY_S = 1.0               # ... and at most this after the first write that is not visible yet


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
        self._seen = threading.Condition()
        self._written = 0                 # lexical writes made (each a commit's documents and deletes)
        self._visible = 0                 # of them, those a refresh made visible to searches
        self._refreshing = False          # a refresher thread runs
        self._coming = 0                  # Writes of the tenant on their way to a commit (coming)
        self._asked = False               # a search waits for a refresh
        self._closed = False
        self._last_s = 0.0                # monotonic: the last lexical write, or the last Write's end
        self._behind_s = 0.0              # ... and the first write not visible yet

    @property
    def index(self) -> LuceneIndex:
        """The Lucene index. While a repair swaps it (the stale one closed, the new one not yet open) a
        search waits here, briefly, instead of meeting a closed index (LexicalIndexClosedError)."""
        self._ready.wait(LEXICAL_SWAP_WAIT_S)
        return self._index

    def searchable(self) -> LuceneIndex:
        """The index once every lexical write made before this call is visible to its searches: a search reads
        the index here, so a Write acknowledged before it started is found (the refresh behind the Write's
        acknowledgement, see the module). Waits for the refresher; refreshes itself when none runs (it stopped
        on an error). A stale index answers at once, from its last state."""
        with self._seen:
            target = self._written
            if self._visible < target and self._refreshing:
                self._asked = True
                self._seen.notify_all()
            self._seen.wait_for(lambda: self._visible >= target or not self._refreshing or self.stale,
                                REFRESH_WAIT_S)
            behind = self._visible < target and not self.stale
        if behind:
            self._refresh(target, searching=True)
        return self.index

    def write(self, puts: Sequence[Memory], doomed: Sequence[int]) -> None:
        """Adds and deletes a commit's documents; they become visible to searches behind the commit (above)."""
        if self.stale:
            return   # the rebuild reads the store: nothing is lost by skipping
        try:
            self._changed = self._changed or bool(puts or doomed)
            if puts:
                self.index.upsert([(m.doc_id, memory_text(m)) for m in puts], refresh=False)
            if doomed:
                self.index.delete(doomed, refresh=False)
        except Exception as exc:
            if not is_storage_full(exc) and not self._writer_lost():
                raise
            self.lost(exc)
            return
        with self._seen:
            self._last_s = time.monotonic()
            if self._visible >= self._written:
                self._behind_s = self._last_s
            self._written += 1
            self._seen.notify_all()
            if self._refreshing:
                return   # the running refresher reads _written again before it stops
            self._refreshing = True
        threading.Thread(target=self._refresher, name=f"lexical-refresh:{self.tenant_id}", daemon=True).start()

    @contextmanager
    def coming(self) -> Iterator[None]:
        """Around a Write of the tenant from its validation to its commit: the refresher waits for it (module)."""
        with self._seen:
            self._coming += 1
        try:
            yield
        finally:
            with self._seen:
                self._coming -= 1
                self._last_s = time.monotonic()
                self._seen.notify_all()

    def _due_in_s(self) -> float:
        """Seconds until the refresher refreshes (0: now); caller holds ``_seen``."""
        if self._asked:
            return 0.0
        now = time.monotonic()
        due = self._behind_s + REFRESH_DELAY_S - now
        if not self._coming:
            due = min(due, self._last_s + REFRESH_QUIET_S - now)
        return max(0.0, due)

    def _refresher(self) -> None:
        """Refreshes when due (module) until every write made is visible, then stops (a burst of Writes shares one
        thread) and detaches from the JVM (an ended thread left attached keeps its Java thread object for good)."""
        try:
            while True:
                with self._seen:
                    while not (self._visible >= self._written or self.stale or self._closed):
                        wait_s = self._due_in_s()
                        if wait_s <= 0:
                            break
                        self._seen.wait(wait_s)
                    target = self._written
                    if self._visible >= target or self.stale or self._closed:
                        return
                    self._asked = False
                if not self._refresh(target):
                    return
        finally:
            with self._seen:
                self._refreshing = False
                self._seen.notify_all()
            detach_current_thread()

    def _refresh(self, target: int, *, searching: bool = False) -> bool:
        """Makes the writes up to ``target`` visible; False when it could not. A full disk marks the index
        stale (searches keep its last reader); a closed index (the shard closing, a repair swapping it) has
        nothing left to show. Any other error is logged by the refresher and raised to a search. Never while the
        index is stale: a repair's rebuild shows itself when it is whole."""
        if self.stale:
            return False
        try:
            self._index.refresh()
        except LexicalIndexClosedError:
            pass
        except Exception as exc:
            if is_storage_full(exc) or self._writer_lost():
                self.lost(exc)
                return False
            if searching:
                raise
            log.exception("tenant %s: the lexical refresh failed; the next search refreshes", self.tenant_id)
            return False
        with self._seen:
            if target > self._visible and target < self._written:
                self._behind_s = time.monotonic()   # the writes made during the refresh: not visible yet
            self._visible = max(self._visible, target)
            self._seen.notify_all()
        return True

    def _writer_lost(self) -> bool:
        """Lucene closed the IndexWriter on a full disk (a refresh on the refresher thread met it first, so a
        write meets a closed writer rather than the full disk itself)."""
        return self.stale or is_storage_full(RuntimeError(self._index.writer_failure()))

    def lost(self, exc: BaseException) -> None:
        if self.stale:
            return
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
        with self._seen:
            self._visible = self._written   # the rebuild was refreshed whole
            self.stale = False
        self._failures, self._after_s = 0, 0.0
        return True

    def close(self) -> None:
        with self._seen:
            self._closed = True   # a waiting refresher stops
            self._seen.notify_all()
        try:
            self.index.close()
        except Exception:
            if not self.stale:
                raise
