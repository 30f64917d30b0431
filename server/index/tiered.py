"""A tenant's dense index across tiers: exact flat while small, IVF-HNSW once large, swapped atomically.

Promotion (and a later rebuild with a larger K) runs on a background executor: the builder exports
the current vectors, trains and fills a new index without holding the lock, then replays the writes
recorded since the export (the delta) and swaps the new index in under the lock. Searches keep using
the old index until the swap; every ``add``/``remove`` made during the build reaches the new index.

Ids are memories' doc ids; a long memory's passage vectors ride under ids derived from its doc id
(server/index/memory_vectors.py). This index keeps how many each memory has: ``remove`` takes a memory's passages
with it, ``search`` answers each memory once at its best vector, and a build exports and re-adds them as any other
vector. The counts are rebuilt from the store on load (``passages=``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Protocol

import numpy as np

from server.index.dense import FlatDenseIndex
from server.index.ivf import IvfDenseIndex, build_ivf
from server.index.memory_vectors import expand, fetch_depth, pool, removal_ids
from server.index.tiers import TierRules, should_build

log = logging.getLogger(__name__)

_SWAP_UNDER_LOCK = 4096   # at most this many delta vectors are replayed while writers wait


class VectorIndex(Protocol):
    tier: str
    description: str
    dim: int

    def __len__(self) -> int: ...
    def add(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None: ...
    def remove(self, ids: Sequence[int] | np.ndarray) -> int: ...
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...
    def export(self) -> tuple[np.ndarray, np.ndarray]: ...
    def reconstruct_batch(self, ids: Sequence[int] | np.ndarray) -> np.ndarray: ...
    def ram_bytes(self) -> int: ...


_Op = tuple[str, np.ndarray, np.ndarray | None]   # ("add", ids, vectors) | ("del", ids, None)

SEARCH_PASSAGES = True   # whether a search reads passage vectors (benchmarks switch it off in process to compare)
PASSAGE_DISCOUNT = 0.0   # a passage vector's cosine counts this much less than a main vector's (memory_vectors.pool)


class TieredDenseIndex:
    def __init__(self, dim: int, *, rules: TierRules, builder: Executor | None = None,
                 initial: VectorIndex | None = None, built_n: int = 0,
                 exact_source: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None,
                 flat_factory: Callable[[int], VectorIndex] = FlatDenseIndex,
                 passages: dict[int, int] | None = None) -> None:
        self.dim = dim
        # doc id -> passage vectors it holds (long memories only; the index holds them too)
        self._passages: dict[int, int] = dict(passages or {})
        self._passage_total = sum(self._passages.values())
        self._passage_most = max(self._passages.values(), default=0)
        self.rules = rules
        self._builder = builder
        # The small tier; any exact index with the VectorIndex contract (e.g. a GPU twin) fits here.
        self._active: VectorIndex = initial if initial is not None else flat_factory(dim)
        self._built_n = built_n if initial is not None else 0
        self._exact_source = exact_source   # exact vectors for rebuilding a lossy (SQ8/PQ) index
        self._lock = threading.RLock()
        self._delta: list[_Op] | None = None
        self._building: Future[bool] | None = None
        self._closed = False
        self.builds = 0
        self.last_build_s = 0.0

    # -- the VectorIndex contract --------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._active)

    @property
    def tier(self) -> str:
        return self._active.tier

    @property
    def description(self) -> str:
        return self._active.description

    @property
    def active(self) -> VectorIndex:
        return self._active

    @property
    def built_n(self) -> int:
        return self._built_n

    @property
    def passage_vectors(self) -> int:
        """Passage vectors held (beside one main vector per memory)."""
        return self._passage_total

    def passages_of(self, doc_id: int) -> int:
        return self._passages.get(int(doc_id), 0)

    def add(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray | Sequence[np.ndarray]) -> Future[bool] | None:
        """Adds memories: ``vectors`` is ``(n, dim)`` main vectors, or one array a memory whose rows after the first
        are its passages (server/index/memory_vectors.py). Returns the future of the background build this growth
        scheduled, if any (see :meth:`maybe_promote`)."""
        if len(ids) == 0:
            return None
        ids_arr, vecs, counts = expand(ids, vectors, dim=self.dim)
        with self._lock:
            self._active.add(ids_arr, vecs)
            if counts:
                self._passages.update(counts)
                self._passage_total += sum(counts.values())
                self._passage_most = max(self._passage_most, *counts.values())
            if self._delta is not None:
                self._delta.append(("add", ids_arr.copy(), vecs.copy()))
        return self.maybe_promote()

    def remove(self, ids: Sequence[int] | np.ndarray) -> int:
        """Removes memories by doc id, each with its passage vectors; returns the vectors removed."""
        if len(ids) == 0:
            return 0
        with self._lock:
            ids_arr = removal_ids(ids, self._passages) if self._passages else np.asarray(ids, dtype=np.int64)
            for doc in ids:
                self._passage_total -= self._passages.pop(int(doc), 0)
            removed = self._active.remove(ids_arr)
            if self._delta is not None:
                self._delta.append(("del", ids_arr.copy(), None))
        return removed

    def search(self, queries: np.ndarray, k: int, *, passages: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the ``k`` best memories for each query: each memory once, at its best vector (max
        pooling over its main vector and passages). ``passages`` False: main vectors only (what a memory is as a
        whole: the near-duplicate rules read that); None: ``SEARCH_PASSAGES``."""
        with self._lock:
            held = self._passage_total
            if not held:
                return self._active.search(queries, k)
            use = SEARCH_PASSAGES if passages is None else passages
            depth, total = fetch_depth(k, passages=held, most=self._passage_most), len(self._active)
            while True:
                found = pool(*self._active.search(queries, depth), k, passages=use, discount=PASSAGE_DISCOUNT)
                # main vectors only: passages may crowd the rows fetched; fetch deeper until k memories (or all)
                if use or depth >= total or (found[1] >= 0).all():
                    return found
                depth = min(total, depth * 4)

    def scores_of(self, query: np.ndarray, doc_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Each of ``doc_ids``' score for ``query`` as :meth:`search` gives it (its best vector, passages as
        ``SEARCH_PASSAGES`` and ``PASSAGE_DISCOUNT`` say): one query's scores of memories another vector found.
        A memory no longer held (removed since that search) scores -inf."""
        docs = np.asarray(doc_ids, dtype=np.int64)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            counts = [self._passages.get(int(d), 0) if SEARCH_PASSAGES else 0 for d in docs]
            rows = removal_ids(docs, {int(d): n for d, n in zip(docs, counts, strict=True) if n})
            try:
                scores = self._active.reconstruct_batch(rows) @ q
            except (KeyError, RuntimeError):   # one of them is gone: each alone, -inf for what is not held
                if len(docs) == 1:
                    return np.full(1, -np.inf, dtype=np.float32)
                return np.concatenate([self.scores_of(q, docs[i:i + 1]) for i in range(len(docs))])
        out = np.empty(len(docs), dtype=np.float32)
        at = 0
        for i, n in enumerate(counts):
            best = scores[at]
            if n:
                best = max(best, float(np.max(scores[at + 1:at + 1 + n])) - PASSAGE_DISCOUNT)
            out[i], at = best, at + 1 + n
        return out

    def export(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            return self._active.export()

    def reconstruct_batch(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        with self._lock:
            return self._active.reconstruct_batch(ids)

    def ram_bytes(self) -> int:
        return self._active.ram_bytes()

    # -- promotion -------------------------------------------------------------------------------------
    @property
    def building(self) -> bool:
        return self._building is not None and not self._building.done()

    def maybe_promote(self) -> Future[bool] | None:
        """Schedules a background build when the tier rules call for one and returns its future: it
        resolves True once the new index is swapped in (False: closed first, nothing swapped). The owner
        (the shard) decides what follows a swap, e.g. a snapshot; the index never calls up."""
        if self._builder is None or self._closed:
            return None
        with self._lock:
            if self.building or not should_build(len(self._active), rules=self.rules, built_n=self._built_n):
                return None
            self._building = future = self._builder.submit(self._build)
        return future

    def wait_built(self, timeout_s: float | None = None) -> None:
        """Blocks until a scheduled build (if any) has finished; re-raises its error."""
        future = self._building
        if future is not None:
            future.result(timeout_s)

    def _build(self) -> bool:
        started = time.perf_counter()
        try:
            with self._lock:
                if self._closed:
                    return False
                self._delta = []    # from here on, every write is recorded for the replay
                lossy = self._active.tier != "flat" and self._exact_source is not None
                if not lossy:
                    ids, vectors = self._active.export()
            if lossy:
                assert self._exact_source is not None
                # Read outside the lock; a write seen both here and in the delta is replayed idempotently.
                ids, vectors = self._exact_source()
            fresh = build_ivf(ids, vectors, rules=self.rules)
            del ids, vectors
            if not self._catch_up_and_swap(fresh):
                return False
        except Exception:
            log.exception("dense index build failed; staying on %s", self._active.description)
            with self._lock:
                self._delta = None
            raise
        self.builds += 1
        self.last_build_s = time.perf_counter() - started
        log.info("dense index promoted to %s (%d vectors) in %.1fs", fresh.description, len(fresh), self.last_build_s)
        return True

    def _catch_up_and_swap(self, fresh: IvfDenseIndex) -> bool:
        while True:
            with self._lock:
                if self._closed:
                    self._delta = None
                    return False
                pending, self._delta = self._delta or [], []
                if sum(len(op[1]) for op in pending) <= _SWAP_UNDER_LOCK:
                    _replay(fresh, pending)
                    self._active = fresh
                    self._built_n = len(fresh)
                    self._delta = None
                    return True
            _replay(fresh, pending)   # a large delta: replay without blocking writers, then look again

    def close(self) -> None:
        """Stops a build in flight from swapping in (the build itself finishes and is dropped)."""
        with self._lock:
            self._closed = True


def _replay(index: VectorIndex, ops: list[_Op]) -> None:
    """Applies recorded writes in order; an add first removes its ids, so replaying one the base
    already holds never duplicates an id."""
    for op, ids, vectors in ops:
        index.remove(ids)
        if op == "add":
            assert vectors is not None
            index.add(ids, vectors)
