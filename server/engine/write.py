"""The write pipeline: validate → one shared embedding pass (the write batcher) → under the tenant's
write lock: apply the memory rules (pending, near-duplicate merge, supersede) → one fsynced log group →
dense and lexical indexes. A Write returns only after all of that, so the next Search sees it.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from server.config import MemoryConfig
from server.domain import LIVE_STATUSES, Memory, MemoryInput, MemoryStatus, WriteOutcome, WriteResult, is_expired
from server.engine import updates
from server.errors import InvalidArgument
from server.hygiene.salience import DEFAULT_IMPORTANCE
from server.index.memory_vectors import main_rows
from server.store.idempotency import Done
from server.tenants.shard import TenantShard

PENDING_BELOW_CONFIDENCE = 0.5   # a write less confident than this is stored PENDING until a Confirm
NEAR_K = 8                       # stored neighbours a new memory's near-duplicate check reads
_NUMBER_RE = re.compile(r"\d+")


def new_memory_id() -> str:
    return "m_" + secrets.token_hex(10)


def new_memory_ids(n: int) -> Iterator[str]:
    """``n`` ids as :func:`new_memory_id` makes them, from one read of the system's random source."""
    hexed = secrets.token_hex(10 * n)
    return ("m_" + hexed[i:i + 20] for i in range(0, 20 * n, 20))


class _Later(Sequence[tuple[float, Memory]]):
    """A neighbour list built on its first read: the update linker reads a new memory's neighbours only when the
    memory names an everyday attribute in a statement (server/engine/updates.py find_updated), which most do not."""

    def __init__(self, build: Callable[[], list[tuple[float, Memory]]]) -> None:
        self._build: Callable[[], list[tuple[float, Memory]]] | None = build
        self._items: list[tuple[float, Memory]] = []

    def _read(self) -> list[tuple[float, Memory]]:
        if self._build is not None:
            self._items, self._build = self._build(), None
        return self._items

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        return self._read()[i]

    def __len__(self) -> int:
        return len(self._read())

    def __iter__(self) -> Iterator[tuple[float, Memory]]:
        return iter(self._read())


class Staging:
    """A write group in progress: new memories and updated versions of existing ones."""

    def __init__(self, shard: TenantShard) -> None:
        self.shard = shard
        self.puts: list[tuple[Memory, np.ndarray]] = []
        self.updates: dict[str, Memory] = {}
        self._new: dict[str, int] = {}
        self._rows = np.zeros(0, dtype=np.int64)   # each put's row in its Write's batch (-1: none), puts first
        self._unbatched = 0   # puts without a row

    def current(self, memory_id: str) -> Memory | None:
        if memory_id in self._new:
            return self.puts[self._new[memory_id]][0]
        return self.updates.get(memory_id) or self.shard.store.get(memory_id)

    def put(self, memory: Memory, vector: np.ndarray, row: int = -1) -> None:
        """``row``: the vector's row in its Write's batch (what :meth:`near_duplicates`' ``batch_sims`` index)."""
        self._new[memory.memory_id] = len(self.puts)
        self.puts.append((memory, vector))
        if len(self.puts) > len(self._rows):   # grown by doubling: a Write's commit appends a put per memory
            self._rows = np.resize(self._rows, max(16, 2 * len(self._rows)))
        self._rows[len(self.puts) - 1] = row
        self._unbatched += row < 0

    def change(self, memory: Memory) -> None:
        if memory.memory_id in self._new:
            i = self._new[memory.memory_id]
            self.puts[i] = (memory, self.puts[i][1])
        else:
            self.updates[memory.memory_id] = memory

    def slot(self, key: str, scope: str) -> list[Memory]:
        found = {m.memory_id: m for m in self.shard.store.in_slot(key, scope)}
        for memory, _ in self.puts:
            if memory.key == key and memory.scope == scope:
                found[memory.memory_id] = memory
        return [m for m in (self.current(i) for i in found) if m is not None]

    def near_duplicates(self, vector: np.ndarray, k: int = NEAR_K, *, hits: tuple[np.ndarray, np.ndarray] | None = None,
                        batch_sims: np.ndarray | None = None, floor: float = -np.inf) -> list[tuple[float, Memory]]:
        """Stored and staged memories by cosine to ``vector``, best first. ``hits``: the dense index's (scores, ids)
        row for ``vector`` when the Write searched all its vectors at once; ``batch_sims``: its cosines to every row
        of the Write's batch (staged puts read theirs there instead of a dot product each); ``floor``: only those
        at or above it (the rules that read the list stop below their thresholds, so a Write's commit need not
        build and sort every staged put for each new memory)."""
        out: list[tuple[float, Memory]] = []
        scores, ids = hits if hits is not None else [
            row[0] for row in self.shard.dense.search(vector[None, :], k, passages=False)]
        for score, doc in zip(scores.tolist(), ids.tolist(), strict=True):
            if score < floor:
                continue
            memory = self.shard.store.by_doc(doc) if doc >= 0 else None
            current = self.current(memory.memory_id) if memory is not None else None
            if current is not None:
                out.append((float(score), current))
        if batch_sims is not None and not self._unbatched:
            cosines = batch_sims[self._rows[:len(self.puts)]]
        else:
            cosines = np.array([float(np.dot(main_rows([vec])[0], vector)) for _, vec in self.puts], dtype=np.float64)
        for i in np.flatnonzero(cosines >= floor).tolist():
            memory = self.puts[i][0]
            out.append((float(cosines[i]), self.current(memory.memory_id) or memory))
        return sorted(out, key=lambda p: (-p[0], p[1].memory_id))


def batch_neighbours(shard: TenantShard, vectors: np.ndarray | Sequence[np.ndarray],
                     ) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """A Write's near-duplicate lookups at once: the dense index searched with every main vector (one call, not one a
    memory; memories as wholes: passage vectors are not read) and the batch's cosines to itself."""
    if not len(vectors):
        return (np.zeros((0, NEAR_K), np.float32), np.zeros((0, NEAR_K), np.int64)), np.zeros((0, 0), np.float32)
    vectors = np.ascontiguousarray(main_rows(vectors), dtype=np.float32)
    return shard.dense.search(vectors, NEAR_K, passages=False), vectors @ vectors.T


def may_link(scores: np.ndarray, sims: np.ndarray, floor: float) -> np.ndarray:
    """Per row of a Write, whether any memory at all lies at or above the update linker's cosine ``floor``: a stored
    neighbour (``scores``, batch_neighbours' dense hits) or another row of the batch (``sims``). The linker reads
    only neighbours at or above it, so a row without one cannot link and its text need not be analysed (most rows
    of an import)."""
    if not len(sims):
        return np.zeros(0, dtype=bool)
    others = sims >= floor
    np.fill_diagonal(others, False)
    return (scores >= floor).any(axis=1) | others.any(axis=1)


def _merge(target: Memory, inp: MemoryInput, *, now_ms: int) -> Memory:
    refs = target.source_refs + ((inp.source_ref,) if inp.source_ref and inp.source_ref not in target.source_refs else ())
    entities = target.entities + tuple(e for e in inp.entities if e not in target.entities)
    importance = max(target.importance, inp.importance if inp.importance is not None else 0.0)
    return dataclasses.replace(
        target, last_access_at_ms=max(target.last_access_at_ms, now_ms), access_count=target.access_count + 1,
        importance=importance, source_refs=refs, entities=entities, updated_at_ms=now_ms,
        confidence=max(target.confidence, inp.confidence if inp.confidence is not None else 1.0))


def commit_writes(shard: TenantShard, inputs: Sequence[MemoryInput], vectors: np.ndarray | Sequence[np.ndarray], *,
                  cfg: MemoryConfig, now_ms: int,
                  done: Callable[[list[WriteResult]], Done] | None = None,
                  marks: list[tuple[str, int, int]] | None = None) -> list[WriteResult]:
    """Applies the memory rules and commits one group. ``vectors``: each input's vector, or its main vector and
    passage vectors as rows (server/index/memory_vectors.py; the rules read main vectors). ``done``: an idempotent
    Write's answer for these results, committed in the same group; ``marks``: the commit's stages
    (``TenantShard.apply``). Caller holds ``shard.write_lock``."""
    staging = Staging(shard)
    for inp in inputs:
        for sid in inp.supersedes:
            if staging.current(sid) is None:
                raise InvalidArgument(f"supersedes names unknown memory {sid!r}")
    results: list[WriteResult] = []
    doc_ids = shard.store.allocate_doc_ids(len(inputs))
    hits, sims = batch_neighbours(shard, vectors)
    linkable = may_link(hits[0], sims, cfg.update_link_cosine)
    ids = new_memory_ids(len(inputs))
    mains = main_rows(vectors) if len(inputs) else ()
    for row, (inp, vector, doc_id) in enumerate(zip(inputs, vectors, doc_ids, strict=True)):
        confidence = 1.0 if inp.confidence is None else inp.confidence
        confident = confidence >= PENDING_BELOW_CONFIDENCE

        def neighbours(floor: float, row: int = row) -> list[tuple[float, Memory]]:
            """The stored and staged memories at or above ``floor`` by cosine, as staged now (near_duplicates)."""
            return staging.near_duplicates(mains[row], hits=(hits[0][row], hits[1][row]), batch_sims=sims[row],
                                           floor=floor)

        if not inp.supersedes:
            target = _duplicate_of(neighbours(cfg.dedupe_cosine), inp, cfg=cfg, confident=confident, now_ms=now_ms)
            if target is not None:
                merged = _merge(target, inp, now_ms=now_ms)
                staging.change(merged)
                # A confident rewrite of a pending memory confirms it.
                superseded = (activate(staging, merged.memory_id, now_ms=now_ms)
                              if confident and target.status == MemoryStatus.PENDING else ())
                merged = staging.current(merged.memory_id) or merged
                results.append(WriteResult(memory_id=merged.memory_id, outcome=WriteOutcome.MERGED,
                                           status=merged.status, merged_into=merged.memory_id,
                                           superseded=superseded))
                continue
        created = inp.created_at_ms or now_ms
        memory = Memory(
            memory_id=next(ids), doc_id=doc_id, content=inp.content, type=inp.type,
            importance=DEFAULT_IMPORTANCE if inp.importance is None else inp.importance,
            created_at_ms=created, last_access_at_ms=inp.last_access_at_ms or created, access_count=0,
            entities=inp.entities, source_ref=inp.source_ref, scope=inp.scope, confidence=confidence,
            key=inp.key, status=MemoryStatus.ACTIVE if confident else MemoryStatus.PENDING,
            # A pending memory keeps the ids it names and supersedes them only once it is confirmed.
            supersedes=() if confident else inp.supersedes, superseded_by="", pinned=inp.pinned, expires_at_ms=inp.expires_at_ms,
            metadata=dict(inp.metadata), source_refs=tuple(dict.fromkeys(((inp.source_ref,) if inp.source_ref else ())
                                                                     + inp.source_refs)),
            updated_at_ms=now_ms, context=inp.context, salience=inp.salience, normalized=inp.normalized)
        staging.put(memory, vector, row)
        superseded: tuple[str, ...] = ()
        if confident:
            superseded = _supersede_slot(staging, memory, now_ms=now_ms) + tuple(
                s for s in (_supersede(staging, sid, memory, now_ms=now_ms) for sid in inp.supersedes) if s)
        # Read after the memory is staged and has superseded what it names: its neighbours as they stand now (the
        # memory itself among them, which the linker skips), only when the linker reads them at all.
        updated = (_link_update(staging, memory.memory_id, _Later(lambda: neighbours(cfg.update_link_cosine)),
                                cfg=cfg, now_ms=now_ms) if confident and linkable[row] else ())
        memory = staging.current(memory.memory_id) or memory
        results.append(WriteResult(memory_id=memory.memory_id,
                                   outcome=WriteOutcome.CREATED if confident else WriteOutcome.PENDING,
                                   status=memory.status, superseded=superseded, updates=updated))
    shard.apply(puts=staging.puts, updates=list(staging.updates.values()),
                done=None if done is None else done(results), marks=marks)
    return results


def _link_update(staging: Staging, memory_id: str, neighbours: Sequence[tuple[float, Memory]], *, cfg: MemoryConfig,
                 now_ms: int) -> tuple[str, ...]:
    """Links a new memory to the older one it updates, if any (server/engine/updates.py); returns its id.
    ``neighbours``: as staged now (Staging.near_duplicates), best first."""
    memory = staging.current(memory_id)
    if memory is None or memory.supersedes:   # an explicit supersede already says what it replaces
        return ()
    found = updates.find_updated(memory, neighbours, min_cosine=cfg.update_link_cosine)
    if found is None:
        return ()
    updates.link(staging, memory_id, found[0].memory_id, now_ms=now_ms)
    return (found[0].memory_id,)


def _duplicate_of(neighbours: list[tuple[float, Memory]], inp: MemoryInput, *, cfg: MemoryConfig,
                  confident: bool, now_ms: int) -> Memory | None:
    numbers = _NUMBER_RE.findall(inp.content)
    for score, memory in neighbours:
        if score < cfg.dedupe_cosine:
            break
        same_place = memory.type == inp.type and memory.scope == inp.scope and memory.key == inp.key
        # Texts that differ in a number ("budget 30000" / "budget 31000", two invoice ids) are different
        # facts however close their embeddings are; an expired memory is not one to merge into.
        if not same_place or _NUMBER_RE.findall(memory.content) != numbers or is_expired(memory, now_ms):
            continue
        if memory.status == MemoryStatus.ACTIVE and confident:
            return memory
        if memory.status == MemoryStatus.PENDING and (confident or not inp.key):
            return memory
    return None


def _supersede(staging: Staging, old_id: str, new: Memory, *, now_ms: int) -> str:
    old = staging.current(old_id)
    if old is None or old.memory_id == new.memory_id or old.status not in LIVE_STATUSES:
        return ""
    staging.change(dataclasses.replace(old, status=MemoryStatus.SUPERSEDED, superseded_by=new.memory_id,
                                       updated_at_ms=now_ms))
    current = staging.current(new.memory_id) or new
    if old.memory_id not in current.supersedes:
        staging.change(dataclasses.replace(current, supersedes=current.supersedes + (old.memory_id,)))
    return old.memory_id


def activate(staging: Staging, memory_id: str, *, now_ms: int) -> tuple[str, ...]:
    """Makes a staged PENDING memory ACTIVE; it then supersedes the live memories of its key and scope and
    those it named in ``supersedes`` while pending. Returns the ids it superseded. Confirm and a
    confident rewrite both come here."""
    memory = staging.current(memory_id)
    if memory is None:
        return ()
    memory = dataclasses.replace(memory, status=MemoryStatus.ACTIVE, updated_at_ms=now_ms)
    staging.change(memory)
    named = tuple(s for s in (_supersede(staging, sid, memory, now_ms=now_ms) for sid in memory.supersedes) if s)
    return _supersede_slot(staging, staging.current(memory_id) or memory, now_ms=now_ms) + named


def _supersede_slot(staging: Staging, new: Memory, *, now_ms: int) -> tuple[str, ...]:
    """Same key and same scope → the newer memory supersedes the live ones; other scopes stay."""
    if not new.key:
        return ()
    done = []
    for old in staging.slot(new.key, new.scope):
        if old.memory_id != new.memory_id and old.status in LIVE_STATUSES:
            done.append(_supersede(staging, old.memory_id, new, now_ms=now_ms))
    return tuple(d for d in done if d)
