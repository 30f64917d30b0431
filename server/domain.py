"""Domain types: frozen dataclasses that the engine, store and indexes share. No gRPC types here."""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field


class MemoryType(enum.IntEnum):
    EPISODIC = 1
    SEMANTIC = 2
    PROCEDURAL = 3


class MemoryStatus(enum.IntEnum):
    ACTIVE = 1
    PENDING = 2
    SUPERSEDED = 3
    EXPIRED = 4
    ARCHIVED = 5
    CONSOLIDATED = 6   # an episodic memory a semantic one stands for (consolidated_into); kept as history


class TimeIntent(enum.IntEnum):
    """What a query asks about time (server/engine/time_intent.py): nothing, the current state, an earlier one,
    or the first one."""

    NONE = 0
    CURRENT = 1
    PAST = 2
    FIRST = 3


class WriteOutcome(enum.IntEnum):
    CREATED = 1
    MERGED = 2
    PENDING = 3
    SKIPPED = 4      # salience below memory.min_salience: nothing was stored


@dataclass(frozen=True, slots=True)
class Memory:
    memory_id: str
    doc_id: int                  # the tenant-local int64 id used by FAISS and Lucene
    content: str
    type: MemoryType
    importance: float
    created_at_ms: int
    last_access_at_ms: int
    access_count: int
    entities: tuple[str, ...]
    source_ref: str
    scope: str
    confidence: float
    key: str
    status: MemoryStatus
    supersedes: tuple[str, ...]
    superseded_by: str
    pinned: bool
    expires_at_ms: int
    metadata: Mapping[str, str]
    source_refs: tuple[str, ...]
    updated_at_ms: int
    context: str = ""            # indexed with the content, never returned as it (MemoryInput.context)
    salience: float = 0.0        # the write's salience estimate (server/hygiene/salience.py); 0: not estimated
    normalized: str = ""         # what text normalisation changed on write ("" = nothing)
    consolidated_into: str = ""  # CONSOLIDATED episodic: the semantic memory that stands for it
    consolidates: tuple[str, ...] = ()  # a consolidation's semantic memory: the episodic memories it stands for
    updates: tuple[str, ...] = ()  # older memories whose attribute this one restates with a new value (engine/updates.py)
    updated_by: str = ""           # the newer memory that updates this one; it stays ACTIVE and ranks below it


LIVE_STATUSES = frozenset({MemoryStatus.ACTIVE, MemoryStatus.PENDING})   # what expiry, capacity and forget act on


def is_expired(m: Memory, now_ms: int) -> bool:
    """A live (ACTIVE or PENDING) memory whose ``expires_at_ms`` has passed at ``now_ms``."""
    return bool(now_ms and m.expires_at_ms and m.expires_at_ms <= now_ms and m.status in LIVE_STATUSES)


def effective_status(m: Memory, now_ms: int) -> MemoryStatus:
    """The stored status, except EXPIRED for a live memory past its expiry (before that is persisted)."""
    return MemoryStatus.EXPIRED if is_expired(m, now_ms) else m.status


@dataclass(frozen=True, slots=True)
class MemoryInput:
    content: str
    type: MemoryType = MemoryType.SEMANTIC
    importance: float | None = None
    created_at_ms: int = 0
    entities: tuple[str, ...] = ()
    source_ref: str = ""
    scope: str = ""
    confidence: float | None = None
    key: str = ""
    supersedes: tuple[str, ...] = ()
    pinned: bool = False
    expires_at_ms: int = 0
    metadata: Mapping[str, str] = field(default_factory=dict)
    last_access_at_ms: int = 0
    context: str = ""
    normalized: str = ""                 # set by the write path: what text normalisation changed
    salience: float = 0.0                # set by the write path: the salience estimate
    source_refs: tuple[str, ...] = ()    # server-written memories (extracted facts): every turn behind it


@dataclass(frozen=True, slots=True)
class Filter:
    types: frozenset[MemoryType] = frozenset()
    statuses: frozenset[MemoryStatus] = frozenset()
    scope: str | None = None
    entities_any: frozenset[str] = frozenset()
    entities_all: frozenset[str] = frozenset()
    key: str | None = None
    created_after_ms: int = 0
    created_before_ms: int = 0
    accessed_after_ms: int = 0
    accessed_before_ms: int = 0
    min_importance: float | None = None

    def matches(self, m: Memory, *, statuses: frozenset[MemoryStatus], now_ms: int = 0) -> bool:
        """True when ``m`` passes every set field; ``statuses`` is the effective status set. With
        ``now_ms``, a live memory past its ``expires_at_ms`` counts as EXPIRED."""
        if statuses and effective_status(m, now_ms) not in statuses:
            return False
        if self.types and m.type not in self.types:
            return False
        if self.scope is not None and m.scope != self.scope:
            return False
        if self.key is not None and m.key != self.key:
            return False
        if self.entities_any and self.entities_any.isdisjoint(m.entities):
            return False
        if self.entities_all and not self.entities_all.issubset(m.entities):
            return False
        if self.created_after_ms and m.created_at_ms < self.created_after_ms:
            return False
        if self.created_before_ms and m.created_at_ms >= self.created_before_ms:
            return False
        if self.accessed_after_ms and m.last_access_at_ms < self.accessed_after_ms:
            return False
        if self.accessed_before_ms and m.last_access_at_ms >= self.accessed_before_ms:
            return False
        return self.min_importance is None or m.importance >= self.min_importance


@dataclass(frozen=True, slots=True)
class Scoring:
    """Per-request overrides of the configured scoring; None means "the server's default"."""

    disable_decay: bool = False
    disable_importance: bool = False
    episodic_half_life_s: float | None = None
    semantic_half_life_s: float | None = None
    procedural_half_life_s: float | None = None
    importance_weight: float | None = None
    now_ms: int = 0
    decay_floor: float | None = None
    recency_weight: float | None = None
    disable_temporal: bool = False


@dataclass(frozen=True, slots=True)
class SearchQuery:
    text: str
    top_k: int = 0
    filter: Filter = field(default_factory=Filter)
    include_history: bool = False
    include_pending: bool = False
    rerank_depth: int = 0
    scoring: Scoring = field(default_factory=Scoring)
    candidates: int = 0
    context_block: bool = False
    context_items: int = 0
    lexical_only: bool = False
    dense_only: bool = False
    min_relevance: float | None = None
    gate: bool = False            # the recall gate: no search when the message clearly needs no memory
    feedback: bool | None = None  # the second retrieval round: None = the server's rule, True = always, False = never

    def effective_statuses(self) -> frozenset[MemoryStatus]:
        if self.filter.statuses:
            return self.filter.statuses
        statuses = {MemoryStatus.ACTIVE}
        if self.include_history:
            statuses.add(MemoryStatus.SUPERSEDED)
        if self.include_pending:
            statuses.add(MemoryStatus.PENDING)
        return frozenset(statuses)


@dataclass(frozen=True, slots=True)
class Breakdown:
    dense_rank: int
    dense_score: float
    bm25_rank: int
    bm25_score: float
    rrf: float
    rerank: float | None
    relevance: float
    decay: float
    importance_weight: float
    final: float
    recency: float = 1.0
    temporal: float = 1.0
    update: float = 1.0                 # the update factor: < 1 for a memory the query's intent does not prefer
    time_intent: TimeIntent = TimeIntent.NONE   # the intent read from the query (applied to recency and update)


@dataclass(frozen=True, slots=True)
class Hit:
    memory: Memory
    breakdown: Breakdown


@dataclass(slots=True)
class Timings:
    """Per-stage wall time in nanoseconds (a mutable accumulator; copied per query at the end)."""

    queue_ns: int = 0
    embed_ns: int = 0
    ann_ns: int = 0
    bm25_ns: int = 0
    fusion_ns: int = 0
    rerank_ns: int = 0
    decay_ns: int = 0
    total_ns: int = 0
    batch_size: int = 0
    rerank_depth_used: int = 0   # the rerank depth this query ran at (the controller's, for a default-depth query)
    # (stage, start_ns, end_ns) on time.monotonic_ns() for the stage spans (server/tracing.py); None: not traced
    marks: list[tuple[str, int, int]] | None = None

    def lap(self, stage: str, start_ns: int) -> int:
        """Nanoseconds since ``start_ns``; recorded as a stage mark when the batch is traced."""
        end_ns = time.monotonic_ns()
        if self.marks is not None:
            self.marks.append((stage, start_ns, end_ns))
        return end_ns - start_ns


@dataclass(frozen=True, slots=True)
class QueryResult:
    hits: tuple[Hit, ...]
    timings: Timings
    context_block: str = ""
    skipped: str = ""            # the recall gate skipped the search: why ("" = it searched)


@dataclass(frozen=True, slots=True)
class WriteResult:
    memory_id: str
    outcome: WriteOutcome
    status: MemoryStatus
    merged_into: str = ""
    superseded: tuple[str, ...] = ()
    salience: float = 0.0
    updates: tuple[str, ...] = ()   # the older memory this write was linked to as its update (engine/updates.py)


@dataclass(frozen=True, slots=True)
class KeyScope:
    """What a credential may touch."""

    key_id: str
    name: str
    tenant_ids: frozenset[str]
    tenant_prefixes: tuple[str, ...]
    admin: bool

    def covers(self, tenant_id: str) -> bool:
        if self.admin or tenant_id in self.tenant_ids:
            return True
        return any(tenant_id.startswith(p) for p in self.tenant_prefixes)


@dataclass(frozen=True, slots=True)
class Consolidation:
    """One cluster of episodic memories and the semantic memory written for it ("" on a dry run)."""

    memory_id: str
    members: tuple[str, ...]
    content: str


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    clusters: tuple[Consolidation, ...] = ()
    restored: int = 0           # CONSOLIDATED memories whose semantic memory was gone: ACTIVE again


@dataclass(frozen=True, slots=True)
class Extraction:
    """What one extractor run wrote: the semantic memories (some PENDING) from the facts the model returned."""

    memory_ids: tuple[str, ...] = ()
    facts: int = 0
    pending: int = 0


class ForgetMode(enum.IntEnum):
    ARCHIVE = 1
    DELETE = 2


@dataclass(frozen=True, slots=True)
class ForgetSpec:
    """What a Forget removes: the filter, an age bound, the mode, and the safety switches."""

    filter: Filter
    older_than_ms: int = 0
    mode: ForgetMode = ForgetMode.ARCHIVE
    include_pinned: bool = False
    all: bool = False
    dry_run: bool = False


class AuditOp(enum.IntEnum):
    WRITE = 1
    MERGE = 2
    SUPERSEDE = 3
    DELETE = 4
    SEARCH = 5
    CONFIRM = 6
    ARCHIVE = 7
    EXPIRE = 8
    USE = 9
    CONSOLIDATE = 10   # a semantic memory written for a cluster of episodic ones (refs: the members)
    UPDATE_LINK = 11   # memory_id is updated by related_id (a write's linker, or LinkUpdate)
    UNLINK = 12        # the update link from related_id to memory_id was removed (LinkUpdate unlink)


@dataclass(frozen=True, slots=True)
class AuditRef:
    memory_id: str
    source_refs: tuple[str, ...] = ()
    related_id: str = ""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    entry_id: int               # the entry's byte offset in the tenant's audit log
    at_ms: int
    op: AuditOp
    refs: tuple[AuditRef, ...]
    query: str = ""
    key_id: str = ""
    note: str = ""
