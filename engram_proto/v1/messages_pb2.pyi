from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_TYPE_UNSPECIFIED: _ClassVar[MemoryType]
    MEMORY_TYPE_EPISODIC: _ClassVar[MemoryType]
    MEMORY_TYPE_SEMANTIC: _ClassVar[MemoryType]
    MEMORY_TYPE_PROCEDURAL: _ClassVar[MemoryType]

class MemoryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_STATUS_UNSPECIFIED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_ACTIVE: _ClassVar[MemoryStatus]
    MEMORY_STATUS_PENDING: _ClassVar[MemoryStatus]
    MEMORY_STATUS_SUPERSEDED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_EXPIRED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_ARCHIVED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_CONSOLIDATED: _ClassVar[MemoryStatus]

class TimeIntent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIME_INTENT_UNSPECIFIED: _ClassVar[TimeIntent]
    TIME_INTENT_CURRENT: _ClassVar[TimeIntent]
    TIME_INTENT_PAST: _ClassVar[TimeIntent]
    TIME_INTENT_FIRST: _ClassVar[TimeIntent]
MEMORY_TYPE_UNSPECIFIED: MemoryType
MEMORY_TYPE_EPISODIC: MemoryType
MEMORY_TYPE_SEMANTIC: MemoryType
MEMORY_TYPE_PROCEDURAL: MemoryType
MEMORY_STATUS_UNSPECIFIED: MemoryStatus
MEMORY_STATUS_ACTIVE: MemoryStatus
MEMORY_STATUS_PENDING: MemoryStatus
MEMORY_STATUS_SUPERSEDED: MemoryStatus
MEMORY_STATUS_EXPIRED: MemoryStatus
MEMORY_STATUS_ARCHIVED: MemoryStatus
MEMORY_STATUS_CONSOLIDATED: MemoryStatus
TIME_INTENT_UNSPECIFIED: TimeIntent
TIME_INTENT_CURRENT: TimeIntent
TIME_INTENT_PAST: TimeIntent
TIME_INTENT_FIRST: TimeIntent

class Memory(_message.Message):
    __slots__ = ("memory_id", "content", "type", "importance", "created_at_ms", "last_access_at_ms", "access_count", "entities", "source_ref", "scope", "confidence", "key", "status", "supersedes", "superseded_by", "pinned", "expires_at_ms", "metadata", "source_refs", "updated_at_ms", "context", "salience", "normalized", "consolidated_into", "consolidates", "updates", "updated_by")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESS_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ACCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REF_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REFS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SALIENCE_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATED_INTO_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATES_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BY_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    content: str
    type: MemoryType
    importance: float
    created_at_ms: int
    last_access_at_ms: int
    access_count: int
    entities: _containers.RepeatedScalarFieldContainer[str]
    source_ref: str
    scope: str
    confidence: float
    key: str
    status: MemoryStatus
    supersedes: _containers.RepeatedScalarFieldContainer[str]
    superseded_by: str
    pinned: bool
    expires_at_ms: int
    metadata: _containers.ScalarMap[str, str]
    source_refs: _containers.RepeatedScalarFieldContainer[str]
    updated_at_ms: int
    context: str
    salience: float
    normalized: str
    consolidated_into: str
    consolidates: _containers.RepeatedScalarFieldContainer[str]
    updates: _containers.RepeatedScalarFieldContainer[str]
    updated_by: str
    def __init__(self, memory_id: _Optional[str] = ..., content: _Optional[str] = ..., type: _Optional[_Union[MemoryType, str]] = ..., importance: _Optional[float] = ..., created_at_ms: _Optional[int] = ..., last_access_at_ms: _Optional[int] = ..., access_count: _Optional[int] = ..., entities: _Optional[_Iterable[str]] = ..., source_ref: _Optional[str] = ..., scope: _Optional[str] = ..., confidence: _Optional[float] = ..., key: _Optional[str] = ..., status: _Optional[_Union[MemoryStatus, str]] = ..., supersedes: _Optional[_Iterable[str]] = ..., superseded_by: _Optional[str] = ..., pinned: _Optional[bool] = ..., expires_at_ms: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., source_refs: _Optional[_Iterable[str]] = ..., updated_at_ms: _Optional[int] = ..., context: _Optional[str] = ..., salience: _Optional[float] = ..., normalized: _Optional[str] = ..., consolidated_into: _Optional[str] = ..., consolidates: _Optional[_Iterable[str]] = ..., updates: _Optional[_Iterable[str]] = ..., updated_by: _Optional[str] = ...) -> None: ...

class MemoryInput(_message.Message):
    __slots__ = ("content", "type", "importance", "created_at_ms", "entities", "source_ref", "scope", "confidence", "key", "supersedes", "pinned", "expires_at_ms", "metadata", "last_access_at_ms", "context")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REF_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESS_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    content: str
    type: MemoryType
    importance: float
    created_at_ms: int
    entities: _containers.RepeatedScalarFieldContainer[str]
    source_ref: str
    scope: str
    confidence: float
    key: str
    supersedes: _containers.RepeatedScalarFieldContainer[str]
    pinned: bool
    expires_at_ms: int
    metadata: _containers.ScalarMap[str, str]
    last_access_at_ms: int
    context: str
    def __init__(self, content: _Optional[str] = ..., type: _Optional[_Union[MemoryType, str]] = ..., importance: _Optional[float] = ..., created_at_ms: _Optional[int] = ..., entities: _Optional[_Iterable[str]] = ..., source_ref: _Optional[str] = ..., scope: _Optional[str] = ..., confidence: _Optional[float] = ..., key: _Optional[str] = ..., supersedes: _Optional[_Iterable[str]] = ..., pinned: _Optional[bool] = ..., expires_at_ms: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., last_access_at_ms: _Optional[int] = ..., context: _Optional[str] = ...) -> None: ...

class Filter(_message.Message):
    __slots__ = ("types", "statuses", "scope", "entities_any", "entities_all", "key", "created_after_ms", "created_before_ms", "accessed_after_ms", "accessed_before_ms", "min_importance")
    TYPES_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_ANY_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_ALL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    ACCESSED_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    ACCESSED_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    types: _containers.RepeatedScalarFieldContainer[MemoryType]
    statuses: _containers.RepeatedScalarFieldContainer[MemoryStatus]
    scope: str
    entities_any: _containers.RepeatedScalarFieldContainer[str]
    entities_all: _containers.RepeatedScalarFieldContainer[str]
    key: str
    created_after_ms: int
    created_before_ms: int
    accessed_after_ms: int
    accessed_before_ms: int
    min_importance: float
    def __init__(self, types: _Optional[_Iterable[_Union[MemoryType, str]]] = ..., statuses: _Optional[_Iterable[_Union[MemoryStatus, str]]] = ..., scope: _Optional[str] = ..., entities_any: _Optional[_Iterable[str]] = ..., entities_all: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ..., created_after_ms: _Optional[int] = ..., created_before_ms: _Optional[int] = ..., accessed_after_ms: _Optional[int] = ..., accessed_before_ms: _Optional[int] = ..., min_importance: _Optional[float] = ...) -> None: ...

class Scoring(_message.Message):
    __slots__ = ("disable_decay", "disable_importance", "episodic_half_life_s", "semantic_half_life_s", "procedural_half_life_s", "importance_weight", "now_ms", "decay_floor", "recency_weight", "disable_temporal")
    DISABLE_DECAY_FIELD_NUMBER: _ClassVar[int]
    DISABLE_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    EPISODIC_HALF_LIFE_S_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_HALF_LIFE_S_FIELD_NUMBER: _ClassVar[int]
    PROCEDURAL_HALF_LIFE_S_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    DECAY_FLOOR_FIELD_NUMBER: _ClassVar[int]
    RECENCY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    DISABLE_TEMPORAL_FIELD_NUMBER: _ClassVar[int]
    disable_decay: bool
    disable_importance: bool
    episodic_half_life_s: float
    semantic_half_life_s: float
    procedural_half_life_s: float
    importance_weight: float
    now_ms: int
    decay_floor: float
    recency_weight: float
    disable_temporal: bool
    def __init__(self, disable_decay: _Optional[bool] = ..., disable_importance: _Optional[bool] = ..., episodic_half_life_s: _Optional[float] = ..., semantic_half_life_s: _Optional[float] = ..., procedural_half_life_s: _Optional[float] = ..., importance_weight: _Optional[float] = ..., now_ms: _Optional[int] = ..., decay_floor: _Optional[float] = ..., recency_weight: _Optional[float] = ..., disable_temporal: _Optional[bool] = ...) -> None: ...

class SearchQuery(_message.Message):
    __slots__ = ("text", "top_k", "filter", "include_history", "include_pending", "rerank_depth", "scoring", "candidates", "context_block", "context_items", "lexical_only", "dense_only", "min_relevance", "gate", "feedback")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PENDING_FIELD_NUMBER: _ClassVar[int]
    RERANK_DEPTH_FIELD_NUMBER: _ClassVar[int]
    SCORING_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BLOCK_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_ITEMS_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_ONLY_FIELD_NUMBER: _ClassVar[int]
    DENSE_ONLY_FIELD_NUMBER: _ClassVar[int]
    MIN_RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    GATE_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    text: str
    top_k: int
    filter: Filter
    include_history: bool
    include_pending: bool
    rerank_depth: int
    scoring: Scoring
    candidates: int
    context_block: bool
    context_items: int
    lexical_only: bool
    dense_only: bool
    min_relevance: float
    gate: bool
    feedback: bool
    def __init__(self, text: _Optional[str] = ..., top_k: _Optional[int] = ..., filter: _Optional[_Union[Filter, _Mapping]] = ..., include_history: _Optional[bool] = ..., include_pending: _Optional[bool] = ..., rerank_depth: _Optional[int] = ..., scoring: _Optional[_Union[Scoring, _Mapping]] = ..., candidates: _Optional[int] = ..., context_block: _Optional[bool] = ..., context_items: _Optional[int] = ..., lexical_only: _Optional[bool] = ..., dense_only: _Optional[bool] = ..., min_relevance: _Optional[float] = ..., gate: _Optional[bool] = ..., feedback: _Optional[bool] = ...) -> None: ...

class Timings(_message.Message):
    __slots__ = ("queue_ns", "embed_ns", "ann_ns", "bm25_ns", "fusion_ns", "rerank_ns", "decay_ns", "total_ns", "batch_size", "rerank_depth_used")
    QUEUE_NS_FIELD_NUMBER: _ClassVar[int]
    EMBED_NS_FIELD_NUMBER: _ClassVar[int]
    ANN_NS_FIELD_NUMBER: _ClassVar[int]
    BM25_NS_FIELD_NUMBER: _ClassVar[int]
    FUSION_NS_FIELD_NUMBER: _ClassVar[int]
    RERANK_NS_FIELD_NUMBER: _ClassVar[int]
    DECAY_NS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    RERANK_DEPTH_USED_FIELD_NUMBER: _ClassVar[int]
    queue_ns: int
    embed_ns: int
    ann_ns: int
    bm25_ns: int
    fusion_ns: int
    rerank_ns: int
    decay_ns: int
    total_ns: int
    batch_size: int
    rerank_depth_used: int
    def __init__(self, queue_ns: _Optional[int] = ..., embed_ns: _Optional[int] = ..., ann_ns: _Optional[int] = ..., bm25_ns: _Optional[int] = ..., fusion_ns: _Optional[int] = ..., rerank_ns: _Optional[int] = ..., decay_ns: _Optional[int] = ..., total_ns: _Optional[int] = ..., batch_size: _Optional[int] = ..., rerank_depth_used: _Optional[int] = ...) -> None: ...

class ScoreBreakdown(_message.Message):
    __slots__ = ("dense_rank", "dense_score", "bm25_rank", "bm25_score", "rrf", "rerank", "relevance", "decay", "importance_weight", "final", "recency", "temporal", "salience", "update", "time_intent")
    DENSE_RANK_FIELD_NUMBER: _ClassVar[int]
    DENSE_SCORE_FIELD_NUMBER: _ClassVar[int]
    BM25_RANK_FIELD_NUMBER: _ClassVar[int]
    BM25_SCORE_FIELD_NUMBER: _ClassVar[int]
    RRF_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    DECAY_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    RECENCY_FIELD_NUMBER: _ClassVar[int]
    TEMPORAL_FIELD_NUMBER: _ClassVar[int]
    SALIENCE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    TIME_INTENT_FIELD_NUMBER: _ClassVar[int]
    dense_rank: int
    dense_score: float
    bm25_rank: int
    bm25_score: float
    rrf: float
    rerank: float
    relevance: float
    decay: float
    importance_weight: float
    final: float
    recency: float
    temporal: float
    salience: float
    update: float
    time_intent: TimeIntent
    def __init__(self, dense_rank: _Optional[int] = ..., dense_score: _Optional[float] = ..., bm25_rank: _Optional[int] = ..., bm25_score: _Optional[float] = ..., rrf: _Optional[float] = ..., rerank: _Optional[float] = ..., relevance: _Optional[float] = ..., decay: _Optional[float] = ..., importance_weight: _Optional[float] = ..., final: _Optional[float] = ..., recency: _Optional[float] = ..., temporal: _Optional[float] = ..., salience: _Optional[float] = ..., update: _Optional[float] = ..., time_intent: _Optional[_Union[TimeIntent, str]] = ...) -> None: ...

class Hit(_message.Message):
    __slots__ = ("memory", "breakdown")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    BREAKDOWN_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    breakdown: ScoreBreakdown
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., breakdown: _Optional[_Union[ScoreBreakdown, _Mapping]] = ...) -> None: ...

class QueryResult(_message.Message):
    __slots__ = ("hits", "timings", "context_block", "skipped")
    HITS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BLOCK_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    timings: Timings
    context_block: str
    skipped: str
    def __init__(self, hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., timings: _Optional[_Union[Timings, _Mapping]] = ..., context_block: _Optional[str] = ..., skipped: _Optional[str] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "path", "device", "dtype", "provenance", "dim")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    device: str
    dtype: str
    provenance: str
    dim: int
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., device: _Optional[str] = ..., dtype: _Optional[str] = ..., provenance: _Optional[str] = ..., dim: _Optional[int] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("max_memories_per_write", "max_content_bytes", "max_queries_per_search", "max_top_k", "max_candidates", "max_page_size", "max_query_bytes", "max_entities", "max_metadata_entries", "queue_capacity")
    MAX_MEMORIES_PER_WRITE_FIELD_NUMBER: _ClassVar[int]
    MAX_CONTENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_QUERIES_PER_SEARCH_FIELD_NUMBER: _ClassVar[int]
    MAX_TOP_K_FIELD_NUMBER: _ClassVar[int]
    MAX_CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_QUERY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTITIES_FIELD_NUMBER: _ClassVar[int]
    MAX_METADATA_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    max_memories_per_write: int
    max_content_bytes: int
    max_queries_per_search: int
    max_top_k: int
    max_candidates: int
    max_page_size: int
    max_query_bytes: int
    max_entities: int
    max_metadata_entries: int
    queue_capacity: int
    def __init__(self, max_memories_per_write: _Optional[int] = ..., max_content_bytes: _Optional[int] = ..., max_queries_per_search: _Optional[int] = ..., max_top_k: _Optional[int] = ..., max_candidates: _Optional[int] = ..., max_page_size: _Optional[int] = ..., max_query_bytes: _Optional[int] = ..., max_entities: _Optional[int] = ..., max_metadata_entries: _Optional[int] = ..., queue_capacity: _Optional[int] = ...) -> None: ...

class Batching(_message.Message):
    __slots__ = ("enabled", "max_batch_requests", "max_batch_tokens", "max_wait_ms")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    max_batch_requests: int
    max_batch_tokens: int
    max_wait_ms: float
    def __init__(self, enabled: _Optional[bool] = ..., max_batch_requests: _Optional[int] = ..., max_batch_tokens: _Optional[int] = ..., max_wait_ms: _Optional[float] = ...) -> None: ...

class RerankControl(_message.Message):
    __slots__ = ("target_ms", "full_depth", "depth", "ms_per_pair", "ms_per_query", "device", "batches_full", "batches_reduced", "batches_skipped", "idle_threads", "batches_wide", "ms_per_pair_wide", "load_scale", "tail_p95_ms")
    TARGET_MS_FIELD_NUMBER: _ClassVar[int]
    FULL_DEPTH_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    MS_PER_PAIR_FIELD_NUMBER: _ClassVar[int]
    MS_PER_QUERY_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FULL_FIELD_NUMBER: _ClassVar[int]
    BATCHES_REDUCED_FIELD_NUMBER: _ClassVar[int]
    BATCHES_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    IDLE_THREADS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_WIDE_FIELD_NUMBER: _ClassVar[int]
    MS_PER_PAIR_WIDE_FIELD_NUMBER: _ClassVar[int]
    LOAD_SCALE_FIELD_NUMBER: _ClassVar[int]
    TAIL_P95_MS_FIELD_NUMBER: _ClassVar[int]
    target_ms: float
    full_depth: int
    depth: int
    ms_per_pair: float
    ms_per_query: float
    device: str
    batches_full: int
    batches_reduced: int
    batches_skipped: int
    idle_threads: int
    batches_wide: int
    ms_per_pair_wide: float
    load_scale: float
    tail_p95_ms: float
    def __init__(self, target_ms: _Optional[float] = ..., full_depth: _Optional[int] = ..., depth: _Optional[int] = ..., ms_per_pair: _Optional[float] = ..., ms_per_query: _Optional[float] = ..., device: _Optional[str] = ..., batches_full: _Optional[int] = ..., batches_reduced: _Optional[int] = ..., batches_skipped: _Optional[int] = ..., idle_threads: _Optional[int] = ..., batches_wide: _Optional[int] = ..., ms_per_pair_wide: _Optional[float] = ..., load_scale: _Optional[float] = ..., tail_p95_ms: _Optional[float] = ...) -> None: ...
