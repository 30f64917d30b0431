"""One tenant's BM25 index: a Lucene directory, its IndexWriter and NRT searchers.

Design (see ``analysis.py`` for fields and analyzers):

* One ``FSDirectory`` per tenant (wrapped in ``NRTCachingDirectory``, so small NRT
  segments stay in RAM until merged or committed). Lucene's own ``IndexWriter`` owns it;
  its write lock makes a second writer on the same directory fail fast.
* Documents are keyed by a caller-chosen int64 id, indexed and stored as a keyword
  (``id``, decimal) for ``updateDocument``/``deleteDocuments`` (so WAL replays are
  idempotent), and as ``NumericDocValues`` (``id_num``).
* Searches sort by (score desc, ``id_num`` asc): the tie-break is the caller's id, not
  Lucene's internal doc number (which changes with merges). Hits are converted in bulk
  by Anserini's ``ScoredDocs`` (scores as one float[], stored ids as one String[]).
* Readers are near-real-time: a ``SearcherManager`` opened from the writer. Every
  search ``acquire``s a searcher and ``release``s it in ``finally``; ``refresh`` swaps
  in a new one and Lucene closes the old reader only when its last holder releases.
  ``upsert``/``delete``/``delete_all`` refresh before returning (``refresh=False`` to
  batch), so the next search sees them. A refresh costs a few ms (it flushes a
  segment), so callers should write in batches rather than one doc per call. A shard
  refreshes behind a Write's acknowledgement (server/tenants/lexical_slot.py).
* Durability is explicit: ``commit(seq)`` stores ``seq`` in the commit user data.
  ``close()`` does NOT commit: on reopen the index is exactly the last commit, and
  ``committed_seq()`` says where to resume the WAL replay.
* Thread-safe: any number of threads may search while others write. ``close`` waits
  for in-flight calls to finish; calls after ``close`` raise ``LexicalIndexClosedError``.
* Only Python values leave this class: ``(scores float32, ids int64)`` arrays.
* A long memory is a block: its document and its windows (``windows.py``), all under its id; a search fetches
  deeper where windows exist and answers each memory once, at its best document.
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from server.lexical.analysis import FIELD_ID_NUM, FIELD_WINDOW, Analysis, QueryBuilder
from server.lexical.documents import DocumentFactory, check_id
from server.lexical.jvm import batch_search_available, jclass, jcall
from server.lexical.windows import MAX_WINDOWS, fold

_log = logging.getLogger(__name__)

SEQ_KEY = "engram.seq"
_NRT_MAX_MERGE_MB = 2.0  # only segments from merges smaller than this are cached

_MAX_K = 2**31 - 1  # a Java int
SEARCH_WINDOWS = True   # whether a search reads long memories' windows (benchmarks switch it off in process to compare)

_EMPTY: tuple[np.ndarray, np.ndarray] = (
    np.empty(0, dtype=np.float32),
    np.empty(0, dtype=np.int64),
)


class LexicalIndexClosedError(RuntimeError):
    """The index was closed."""


def _empty() -> tuple[np.ndarray, np.ndarray]:
    return _EMPTY[0].copy(), _EMPTY[1].copy()


class _Gate:
    """Counts in-flight calls so ``close`` can wait for them and refuse new ones."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False

    @contextmanager
    def enter(self) -> Iterator[None]:
        with self._cond:
            if self._closed:
                raise LexicalIndexClosedError("lexical index is closed")
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if self._active == 0:
                    self._cond.notify_all()

    def close(self) -> bool:
        """Refuse new calls and wait for in-flight ones; False if already closed."""
        with self._cond:
            if self._closed:
                return False
            self._closed = True
            self._cond.wait_for(lambda: self._active == 0)
            return True


class LuceneIndex:
    """BM25 over one tenant's memories. Create with :meth:`open` (JVM must be started)."""

    def __init__(self, *, path: Path, directory: Any, writer: Any, manager: Any,
                 similarity: Any, analysis: Analysis, committed_seq: int, windowed: bool = False) -> None:
        self._path = path
        self._directory = directory
        self._writer = writer
        self._manager = manager
        self._similarity = similarity
        self._queries = QueryBuilder(analysis)
        self._docs = DocumentFactory()
        self._committed_seq = committed_seq
        self._windowed = windowed   # whether any window was ever written here: searches then fetch deeper and fold
        self._commit_lock = threading.Lock()
        self._gate = _Gate()
        JSort = jclass("org.apache.lucene.search.Sort")
        JSortField = jclass("org.apache.lucene.search.SortField")
        JSortFieldType = jclass("org.apache.lucene.search.SortField$Type")
        self._JScoredDocs = jclass("io.anserini.search.ScoredDocs")
        self._batch = jclass("engram.BatchSearch") if batch_search_available() else None
        self._sort = JSort(JSortField.FIELD_SCORE, JSortField(FIELD_ID_NUM, JSortFieldType.LONG))

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        ram_buffer_mb: float = 16.0,
        nrt_cache_mb: float = 8.0,
    ) -> LuceneIndex:
        """Open (or create) the index in directory ``path``.

        Java heap per open index is bounded by about ``ram_buffer_mb`` (IndexWriter
        buffer) + ``nrt_cache_mb`` (uncommitted small segments kept in RAM); size the
        JVM's ``heap_mb`` for the number of tenants open at once.
        """
        if ram_buffer_mb <= 0 or nrt_cache_mb < 0:
            raise ValueError("ram_buffer_mb must be > 0 and nrt_cache_mb >= 0")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        JFile = jclass("java.io.File")
        JFSDirectory = jclass("org.apache.lucene.store.FSDirectory")
        JNRTCachingDirectory = jclass("org.apache.lucene.store.NRTCachingDirectory")
        JIndexWriter = jclass("org.apache.lucene.index.IndexWriter")
        JIndexWriterConfig = jclass("org.apache.lucene.index.IndexWriterConfig")
        JOpenMode = jclass("org.apache.lucene.index.IndexWriterConfig$OpenMode")
        JBM25Similarity = jclass("org.apache.lucene.search.similarities.BM25Similarity")
        JSearcherManager = jclass("org.apache.lucene.search.SearcherManager")
        JDirectoryReader = jclass("org.apache.lucene.index.DirectoryReader")

        analysis = Analysis.create()
        similarity = JBM25Similarity(float(k1), float(b))
        java_path = jcall(JFile(str(path)), "toPath")
        fs_directory = JFSDirectory.open(java_path)
        # Small freshly flushed segments stay in RAM until merged or committed (Lucene's
        # recommended setup for frequent NRT refreshes).
        directory = JNRTCachingDirectory(fs_directory, _NRT_MAX_MERGE_MB, float(nrt_cache_mb))
        committed_seq, windowed = 0, False
        if JDirectoryReader.indexExists(directory):
            committed_seq = _read_seq(directory)
            windowed = _has_windows(JDirectoryReader, directory)
        config = JIndexWriterConfig(analysis.per_field)
        mode = JOpenMode.CREATE_OR_APPEND
        jcall(config, "setOpenMode", mode)
        jcall(config, "setSimilarity", similarity)
        jcall(config, "setCommitOnClose", False)
        jcall(config, "setRAMBufferSizeMB", float(ram_buffer_mb))
        writer = None
        try:
            writer = JIndexWriter(directory, config)
            manager = JSearcherManager(writer, None)  # default SearcherFactory
        except Exception:
            if writer is not None:
                jcall(writer, "rollback")
            jcall(directory, "close")
            raise
        _log.info("lexical index opened at %s (committed_seq=%d)", path, committed_seq)
        return cls(path=path, directory=directory, writer=writer, manager=manager,
                   similarity=similarity, analysis=analysis, committed_seq=committed_seq, windowed=windowed)

    # ----------------------------------------------------------------- writes

    def upsert(self, docs: Sequence[tuple[int, str]], *, refresh: bool = True) -> None:
        """Insert or replace documents by id (a long text with its windows, windows.py). Visible to search on return
        if ``refresh``."""
        with self._gate.enter():
            if self._docs.update_all(self._writer, docs):
                self._windowed = True
            if refresh and docs:
                jcall(self._manager, "maybeRefreshBlocking")

    def delete(self, ids: Sequence[int], *, refresh: bool = True) -> None:
        """Delete documents by id, each with its windows (unknown ids are ignored)."""
        with self._gate.enter():
            for doc_id in ids:
                # deleteDocuments(Term...) is not reachable through pyjnius; (Query...) is.
                query = self._docs.id_query(check_id(doc_id))
                jcall(self._writer, "deleteDocuments", query)
            if refresh and ids:
                jcall(self._manager, "maybeRefreshBlocking")

    def delete_all(self, *, refresh: bool = True) -> None:
        """Delete every document (committed only by the next :meth:`commit`)."""
        with self._gate.enter():
            jcall(self._writer, "deleteAll")
            if refresh:
                jcall(self._manager, "maybeRefreshBlocking")

    def refresh(self) -> None:
        """Make all writes so far visible to searches (blocks until done)."""
        with self._gate.enter():
            jcall(self._manager, "maybeRefreshBlocking")

    def commit(self, seq: int) -> None:
        """Durably commit everything written so far, recording ``seq`` with it."""
        if seq < 0:
            raise ValueError(f"seq must be >= 0, got {seq}")
        JHashMap = jclass("java.util.HashMap")
        with self._gate.enter(), self._commit_lock:
            data = JHashMap()
            value = str(int(seq))
            jcall(data, "put", SEQ_KEY, value)
            entries = jcall(data, "entrySet")
            jcall(self._writer, "setLiveCommitData", entries)
            jcall(self._writer, "commit")
            self._committed_seq = int(seq)

    def writer_failure(self) -> str:
        """The error Lucene closed the IndexWriter on (its "tragic" exception, e.g. a full disk at a flush), as
        text; '' while the writer is usable."""
        tragic = jcall(self._writer, "getTragicException")
        return "" if tragic is None else str(jcall(tragic, "toString"))

    # ---------------------------------------------------------------- reads

    def committed_seq(self) -> int:
        """The ``seq`` of the last commit (0 for a new index)."""
        return self._committed_seq

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` BM25 hits as ``(scores float32, ids int64)``, best first, ties by id."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search` for several queries against one consistent snapshot. Where long memories' windows exist,
        each memory once at its best document: hits are fetched deeper (twice ``k``, then four times as deep while a
        query's hits fill the fetch with fewer than ``k`` memories) and folded."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        k = min(int(k), _MAX_K)  # Lucene itself caps the hit queue at maxDoc
        windowed = self._windowed
        depth = min(_MAX_K, 2 * k) if windowed else k
        with self._searcher() as searcher:
            while True:
                if self._batch is None:
                    found = [self._search_one(searcher, q, depth, windows=SEARCH_WINDOWS) for q in queries]
                else:
                    found = self._search_batch(searcher, queries, depth, windows=SEARCH_WINDOWS)
                if not windowed:
                    return found
                folded = [fold(scores, ids, k) for scores, ids in found]
                short = any(len(f[1]) < k and len(raw[1]) >= depth for f, raw in zip(folded, found, strict=True))
                if not short or depth >= min(_MAX_K, k * (1 + MAX_WINDOWS)):
                    return folded
                depth = min(_MAX_K, 4 * depth, k * (1 + MAX_WINDOWS))

    @contextmanager
    def _searcher(self) -> Iterator[Any]:
        """A BM25 searcher over the latest refreshed snapshot, released on exit."""
        with self._gate.enter():
            searcher = jcall(self._manager, "acquire")
            try:
                similarity = self._similarity
                jcall(searcher, "setSimilarity", similarity)
                yield searcher
            finally:
                jcall(self._manager, "release", searcher)

    def _build(self, query: str, windows: bool) -> Any:
        built = self._queries.build(query)
        return built if windows or built is None or not self._windowed else self._queries.without_windows(built)

    def _search_batch(self, searcher: Any, queries: Sequence[str], k: int, *,
                      windows: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every query in one JNI call (``engram.BatchSearch``): ids come from the sort values, no
        stored fields are read. Same hits, order and scores as :meth:`_search_one`."""
        built = [self._build(q, windows) for q in queries]
        sort = self._sort
        batch = self._batch
        packed = np.asarray(batch.search(searcher, built, k, sort), dtype=np.int64)
        out: list[tuple[np.ndarray, np.ndarray]] = []
        at = 0
        for _ in queries:
            n = int(packed[at])
            ids = packed[at + 1: at + 1 + n]
            scores = packed[at + 1 + n: at + 1 + 2 * n].astype(np.int32).view(np.float32)
            at += 1 + 2 * n
            out.append((scores, ids) if n else _empty())
        return out

    def _search_one(self, searcher: Any, query: str, k: int, *, windows: bool = True) -> tuple[np.ndarray, np.ndarray]:
        lucene_query = self._build(query, windows)
        if lucene_query is None:
            return _empty()
        sort = self._sort
        top = jcall(searcher, "search", lucene_query, k, sort, True)
        # Bulk conversion: ScoredDocs copies scores into a float[] and reads the stored
        # "id" of each hit into a String[]; pyjnius converts each array in one call.
        # Measured on SciFact, k=100: ~0.4 ms vs ~0.9 ms for reading FieldDoc sort
        # values hit by hit (every ScoreDoc becomes a Python proxy).
        hits = self._JScoredDocs.fromTopDocs(top, searcher)
        docids = hits.docids
        if not docids:
            return _empty()
        scores = np.asarray(hits.scores, dtype=np.float32)
        ids = np.fromiter((int(d) for d in docids), dtype=np.int64, count=len(docids))
        return scores, ids

    def count(self) -> int:
        """Live Lucene documents visible to search (a long memory's windows count too)."""
        with self._gate.enter():
            searcher = jcall(self._manager, "acquire")
            try:
                reader = jcall(searcher, "getIndexReader")
                return int(jcall(reader, "numDocs"))
            finally:
                jcall(self._manager, "release", searcher)

    def ram_bytes(self) -> int:
        """Heap held by the writer's buffer and RAM-cached segments (readers are mmapped)."""
        with self._gate.enter():
            return int(jcall(self._writer, "ramBytesUsed")) + int(jcall(self._directory, "ramBytesUsed"))

    def disk_bytes(self) -> int:
        """Bytes of the index files on disk."""
        with self._gate.enter():
            total = 0
            for entry in os.scandir(self._path):
                if entry.is_file():
                    total += entry.stat().st_size
            return total

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Wait for in-flight calls, then close. Uncommitted writes are discarded."""
        if not self._gate.close():
            return
        try:
            jcall(self._manager, "close")
        finally:
            try:
                jcall(self._writer, "close")
            finally:
                jcall(self._directory, "close")
        _log.info("lexical index closed at %s", self._path)

    def __enter__(self) -> LuceneIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _has_windows(JDirectoryReader: Any, directory: Any) -> bool:
    """Whether the last commit in ``directory`` holds a window document (windows.py)."""
    reader = JDirectoryReader.open(directory)
    try:
        term = jclass("org.apache.lucene.index.Term")(FIELD_WINDOW, "1")
        return int(jcall(reader, "docFreq", term)) > 0
    finally:
        jcall(reader, "close")


def _read_seq(directory: Any) -> int:
    JSegmentInfos = jclass("org.apache.lucene.index.SegmentInfos")
    latest = JSegmentInfos.readLatestCommit(directory)
    user_data = jcall(latest, "getUserData")
    value = jcall(user_data, "get", SEQ_KEY)
    return int(value) if value is not None else 0


# The first Writes after a start paid for the JVM compiling Lucene's indexing code: Writes of 128 short turns
# spent 58 ms each in Lucene over the first ten and 22 ms from the fortieth on (one client, 2-core AMD EPYC). The
# start indexes this many generated documents, in Writes of WARM_UP_WRITE each refreshed as a Write is, so that
# code runs compiled from the first Write (about a second of one core at the start).
WARM_UP_DOCS = 6144
WARM_UP_WRITE = 128
_WARM_SYLLABLES = ("ka", "lo", "mi", "ren", "sa", "tor", "vel", "an", "ber", "cho", "di", "el", "fa", "gun", "ho",
                   "is", "jo", "ku", "lan", "mor")
_WARM_CJK = ("预算", "会议", "工作", "搬家", "周末", "手机", "朋友", "电脑")


def warm_up_texts(n: int) -> list[str]:
    """``n`` generated chat turns for the start's indexing warm-up: a speaker, 6-24 words of 1-3 syllables,
    sometimes a number, a code-like token or Chinese words (every field's analyzer runs). Deterministic."""
    rng = random.Random(7)
    texts = []
    for i in range(n):
        words = ["".join(rng.choices(_WARM_SYLLABLES, k=rng.randint(1, 3))) for _ in range(rng.randint(6, 24))]
        if i % 3 == 0:
            words.append(str(rng.randint(1, 99999)))
        if i % 7 == 0:
            words.append(f"XJ-{rng.randint(1000, 9999)}-{i}")
        if i % 5 == 0:
            words.append("".join(rng.choices(_WARM_CJK, k=3)))
        texts.append(f"{words[0].title()}: {' '.join(words[1:])}.")
    return texts


def warm_up(*, docs: int = WARM_UP_DOCS) -> None:
    """Every Java call that :class:`LuceneIndex` makes, once, on a throwaway index (see
    ``server.lexical.jvm.start_jvm``): open, upsert, English / Chinese / code / empty queries through
    the batch helper and the per-query path, count, sizes, delete, commit, close; before them, ``docs``
    generated documents written and refreshed as Writes are (WARM_UP_DOCS)."""
    with tempfile.TemporaryDirectory(prefix="engram-jvm-warm-up-") as tmp:
        index = LuceneIndex.open(Path(tmp) / "index")
        try:
            texts = warm_up_texts(docs)
            for start in range(0, docs, WARM_UP_WRITE):
                index.upsert([(1000 + i, texts[i]) for i in range(start, min(docs, start + WARM_UP_WRITE))],
                             refresh=False)
                index.refresh()
            long_text = " ".join(texts[:40])   # a long memory: a block of its document and its windows (windows.py)
            index.upsert([(1, "warm up the lexical index"), (2, "预算会议 XJ-2026-0421 warm"), (3, long_text)])
            queries = ["warm up", "预算", "XJ-2026-0421 budget", "", texts[20]]
            index.search_many(queries, 10)
            with index._searcher() as searcher:  # the per-query path too, whichever search_many took
                for query in queries:
                    index._search_one(searcher, query, 10)
                    index._search_one(searcher, query, 10, windows=False)
            index.count()
            index.ram_bytes()
            index.disk_bytes()
            index.delete([2])
            index.delete_all(refresh=True)
            index.commit(1)
        finally:
            index.close()
