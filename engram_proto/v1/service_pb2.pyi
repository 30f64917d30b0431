from engram_proto.v1 import messages_pb2 as _messages_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WriteOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WRITE_OUTCOME_UNSPECIFIED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_CREATED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_MERGED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_PENDING: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_SKIPPED: _ClassVar[WriteOutcome]

class ForgetMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FORGET_MODE_UNSPECIFIED: _ClassVar[ForgetMode]
    FORGET_MODE_ARCHIVE: _ClassVar[ForgetMode]
    FORGET_MODE_DELETE: _ClassVar[ForgetMode]

class AuditOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUDIT_OP_UNSPECIFIED: _ClassVar[AuditOp]
    AUDIT_OP_WRITE: _ClassVar[AuditOp]
    AUDIT_OP_MERGE: _ClassVar[AuditOp]
    AUDIT_OP_SUPERSEDE: _ClassVar[AuditOp]
    AUDIT_OP_DELETE: _ClassVar[AuditOp]
    AUDIT_OP_SEARCH: _ClassVar[AuditOp]
    AUDIT_OP_CONFIRM: _ClassVar[AuditOp]
    AUDIT_OP_ARCHIVE: _ClassVar[AuditOp]
    AUDIT_OP_EXPIRE: _ClassVar[AuditOp]
    AUDIT_OP_USE: _ClassVar[AuditOp]
    AUDIT_OP_CONSOLIDATE: _ClassVar[AuditOp]
    AUDIT_OP_UPDATE_LINK: _ClassVar[AuditOp]
    AUDIT_OP_UNLINK: _ClassVar[AuditOp]
WRITE_OUTCOME_UNSPECIFIED: WriteOutcome
WRITE_OUTCOME_CREATED: WriteOutcome
WRITE_OUTCOME_MERGED: WriteOutcome
WRITE_OUTCOME_PENDING: WriteOutcome
WRITE_OUTCOME_SKIPPED: WriteOutcome
FORGET_MODE_UNSPECIFIED: ForgetMode
FORGET_MODE_ARCHIVE: ForgetMode
FORGET_MODE_DELETE: ForgetMode
AUDIT_OP_UNSPECIFIED: AuditOp
AUDIT_OP_WRITE: AuditOp
AUDIT_OP_MERGE: AuditOp
AUDIT_OP_SUPERSEDE: AuditOp
AUDIT_OP_DELETE: AuditOp
AUDIT_OP_SEARCH: AuditOp
AUDIT_OP_CONFIRM: AuditOp
AUDIT_OP_ARCHIVE: AuditOp
AUDIT_OP_EXPIRE: AuditOp
AUDIT_OP_USE: AuditOp
AUDIT_OP_CONSOLIDATE: AuditOp
AUDIT_OP_UPDATE_LINK: AuditOp
AUDIT_OP_UNLINK: AuditOp

class WriteRequest(_message.Message):
    __slots__ = ("tenant_id", "memories", "idempotency_key")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    memories: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MemoryInput]
    idempotency_key: str
    def __init__(self, tenant_id: _Optional[str] = ..., memories: _Optional[_Iterable[_Union[_messages_pb2.MemoryInput, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class WriteResult(_message.Message):
    __slots__ = ("memory_id", "outcome", "merged_into", "superseded", "status", "salience", "updates")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MERGED_INTO_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SALIENCE_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    outcome: WriteOutcome
    merged_into: str
    superseded: _containers.RepeatedScalarFieldContainer[str]
    status: _messages_pb2.MemoryStatus
    salience: float
    updates: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, memory_id: _Optional[str] = ..., outcome: _Optional[_Union[WriteOutcome, str]] = ..., merged_into: _Optional[str] = ..., superseded: _Optional[_Iterable[str]] = ..., status: _Optional[_Union[_messages_pb2.MemoryStatus, str]] = ..., salience: _Optional[float] = ..., updates: _Optional[_Iterable[str]] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("results", "timings", "skipped")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[WriteResult]
    timings: _messages_pb2.Timings
    skipped: int
    def __init__(self, results: _Optional[_Iterable[_Union[WriteResult, _Mapping]]] = ..., timings: _Optional[_Union[_messages_pb2.Timings, _Mapping]] = ..., skipped: _Optional[int] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("tenant_id", "queries")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    queries: _containers.RepeatedCompositeFieldContainer[_messages_pb2.SearchQuery]
    def __init__(self, tenant_id: _Optional[str] = ..., queries: _Optional[_Iterable[_Union[_messages_pb2.SearchQuery, _Mapping]]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_messages_pb2.QueryResult]
    def __init__(self, results: _Optional[_Iterable[_Union[_messages_pb2.QueryResult, _Mapping]]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("tenant_id", "memory_ids")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant_id: _Optional[str] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("memories", "missing")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Memory]
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, memories: _Optional[_Iterable[_Union[_messages_pb2.Memory, _Mapping]]] = ..., missing: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("tenant_id", "memory_ids", "idempotency_key")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    idempotency_key: str
    def __init__(self, tenant_id: _Optional[str] = ..., memory_ids: _Optional[_Iterable[str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted", "missing")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, deleted: _Optional[int] = ..., missing: _Optional[_Iterable[str]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("tenant_id", "page_size", "page_token", "filter")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    page_size: int
    page_token: str
    filter: _messages_pb2.Filter
    def __init__(self, tenant_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[_Union[_messages_pb2.Filter, _Mapping]] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[_messages_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("version", "device", "embedder", "reranker", "limits", "batching", "rrf_k", "half_life_s", "rerank_control")
    class HalfLifeSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    RERANKER_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    BATCHING_FIELD_NUMBER: _ClassVar[int]
    RRF_K_FIELD_NUMBER: _ClassVar[int]
    HALF_LIFE_S_FIELD_NUMBER: _ClassVar[int]
    RERANK_CONTROL_FIELD_NUMBER: _ClassVar[int]
    version: str
    device: str
    embedder: _messages_pb2.ModelInfo
    reranker: _messages_pb2.ModelInfo
    limits: _messages_pb2.Limits
    batching: _messages_pb2.Batching
    rrf_k: float
    half_life_s: _containers.ScalarMap[str, float]
    rerank_control: _messages_pb2.RerankControl
    def __init__(self, version: _Optional[str] = ..., device: _Optional[str] = ..., embedder: _Optional[_Union[_messages_pb2.ModelInfo, _Mapping]] = ..., reranker: _Optional[_Union[_messages_pb2.ModelInfo, _Mapping]] = ..., limits: _Optional[_Union[_messages_pb2.Limits, _Mapping]] = ..., batching: _Optional[_Union[_messages_pb2.Batching, _Mapping]] = ..., rrf_k: _Optional[float] = ..., half_life_s: _Optional[_Mapping[str, float]] = ..., rerank_control: _Optional[_Union[_messages_pb2.RerankControl, _Mapping]] = ...) -> None: ...

class CreateTenantRequest(_message.Message):
    __slots__ = ("tenant_id", "initial_memories", "template_tenant_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    INITIAL_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    initial_memories: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MemoryInput]
    template_tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., initial_memories: _Optional[_Iterable[_Union[_messages_pb2.MemoryInput, _Mapping]]] = ..., template_tenant_id: _Optional[str] = ...) -> None: ...

class CreateTenantResponse(_message.Message):
    __slots__ = ("tenant_id", "initial_memories")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    INITIAL_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    initial_memories: int
    def __init__(self, tenant_id: _Optional[str] = ..., initial_memories: _Optional[int] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenant_ids",)
    TENANT_IDS_FIELD_NUMBER: _ClassVar[int]
    tenant_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateKeyRequest(_message.Message):
    __slots__ = ("name", "tenant_ids", "tenant_prefixes", "admin")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_IDS_FIELD_NUMBER: _ClassVar[int]
    TENANT_PREFIXES_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant_ids: _containers.RepeatedScalarFieldContainer[str]
    tenant_prefixes: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    def __init__(self, name: _Optional[str] = ..., tenant_ids: _Optional[_Iterable[str]] = ..., tenant_prefixes: _Optional[_Iterable[str]] = ..., admin: _Optional[bool] = ...) -> None: ...

class CreateKeyResponse(_message.Message):
    __slots__ = ("key_id", "secret")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    secret: str
    def __init__(self, key_id: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class RevokeKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RevokeKeyResponse(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RotateKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RotateKeyResponse(_message.Message):
    __slots__ = ("key_id", "secret")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    secret: str
    def __init__(self, key_id: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("tenant_id", "memory_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    memory_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., memory_id: _Optional[str] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("versions", "latest_id")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    LATEST_ID_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[_messages_pb2.Memory]
    latest_id: str
    def __init__(self, versions: _Optional[_Iterable[_Union[_messages_pb2.Memory, _Mapping]]] = ..., latest_id: _Optional[str] = ...) -> None: ...

class ConfirmRequest(_message.Message):
    __slots__ = ("tenant_id", "memory_ids", "idempotency_key")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    idempotency_key: str
    def __init__(self, tenant_id: _Optional[str] = ..., memory_ids: _Optional[_Iterable[str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ConfirmResult(_message.Message):
    __slots__ = ("memory", "superseded")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    memory: _messages_pb2.Memory
    superseded: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, memory: _Optional[_Union[_messages_pb2.Memory, _Mapping]] = ..., superseded: _Optional[_Iterable[str]] = ...) -> None: ...

class ConfirmResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ConfirmResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ConfirmResult, _Mapping]]] = ...) -> None: ...

class LinkUpdateRequest(_message.Message):
    __slots__ = ("tenant_id", "memory_id", "updates_id", "unlink")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATES_ID_FIELD_NUMBER: _ClassVar[int]
    UNLINK_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    memory_id: str
    updates_id: str
    unlink: bool
    def __init__(self, tenant_id: _Optional[str] = ..., memory_id: _Optional[str] = ..., updates_id: _Optional[str] = ..., unlink: _Optional[bool] = ...) -> None: ...

class LinkUpdateResponse(_message.Message):
    __slots__ = ("memory", "updated")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    memory: _messages_pb2.Memory
    updated: _messages_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_messages_pb2.Memory, _Mapping]] = ..., updated: _Optional[_Union[_messages_pb2.Memory, _Mapping]] = ...) -> None: ...

class TouchRequest(_message.Message):
    __slots__ = ("tenant_id", "memory_ids")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant_id: _Optional[str] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class TouchResponse(_message.Message):
    __slots__ = ("touched", "missing")
    TOUCHED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    touched: int
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, touched: _Optional[int] = ..., missing: _Optional[_Iterable[str]] = ...) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("tenant_id", "filter", "older_than_ms", "mode", "include_pinned", "all", "dry_run", "idempotency_key")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    OLDER_THAN_MS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PINNED_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    filter: _messages_pb2.Filter
    older_than_ms: int
    mode: ForgetMode
    include_pinned: bool
    all: bool
    dry_run: bool
    idempotency_key: str
    def __init__(self, tenant_id: _Optional[str] = ..., filter: _Optional[_Union[_messages_pb2.Filter, _Mapping]] = ..., older_than_ms: _Optional[int] = ..., mode: _Optional[_Union[ForgetMode, str]] = ..., include_pinned: _Optional[bool] = ..., all: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ForgetResponse(_message.Message):
    __slots__ = ("count", "memory_ids")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    count: int
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, count: _Optional[int] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class AuditRef(_message.Message):
    __slots__ = ("memory_id", "source_refs", "related_id")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REFS_FIELD_NUMBER: _ClassVar[int]
    RELATED_ID_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    source_refs: _containers.RepeatedScalarFieldContainer[str]
    related_id: str
    def __init__(self, memory_id: _Optional[str] = ..., source_refs: _Optional[_Iterable[str]] = ..., related_id: _Optional[str] = ...) -> None: ...

class AuditEntry(_message.Message):
    __slots__ = ("entry_id", "at_ms", "op", "refs", "query", "key_id", "note")
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    REFS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    entry_id: int
    at_ms: int
    op: AuditOp
    refs: _containers.RepeatedCompositeFieldContainer[AuditRef]
    query: str
    key_id: str
    note: str
    def __init__(self, entry_id: _Optional[int] = ..., at_ms: _Optional[int] = ..., op: _Optional[_Union[AuditOp, str]] = ..., refs: _Optional[_Iterable[_Union[AuditRef, _Mapping]]] = ..., query: _Optional[str] = ..., key_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class AuditRequest(_message.Message):
    __slots__ = ("tenant_id", "page_size", "page_token", "ops", "memory_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    page_size: int
    page_token: str
    ops: _containers.RepeatedScalarFieldContainer[AuditOp]
    memory_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[AuditOp, str]]] = ..., memory_id: _Optional[str] = ...) -> None: ...

class AuditResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteTenantRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class DeleteTenantResponse(_message.Message):
    __slots__ = ("deleted_memories",)
    DELETED_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    deleted_memories: int
    def __init__(self, deleted_memories: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class TenantStats(_message.Message):
    __slots__ = ("tenant_id", "state", "memories", "dense_tier", "dense_index", "ram_bytes", "idle_s", "load_ms", "log_bytes", "live_bytes", "compactions", "lexical_stale", "queued", "rejected", "replica")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    DENSE_TIER_FIELD_NUMBER: _ClassVar[int]
    DENSE_INDEX_FIELD_NUMBER: _ClassVar[int]
    RAM_BYTES_FIELD_NUMBER: _ClassVar[int]
    IDLE_S_FIELD_NUMBER: _ClassVar[int]
    LOAD_MS_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    LIVE_BYTES_FIELD_NUMBER: _ClassVar[int]
    COMPACTIONS_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_STALE_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    state: str
    memories: int
    dense_tier: str
    dense_index: str
    ram_bytes: int
    idle_s: float
    load_ms: float
    log_bytes: int
    live_bytes: int
    compactions: int
    lexical_stale: bool
    queued: int
    rejected: int
    replica: str
    def __init__(self, tenant_id: _Optional[str] = ..., state: _Optional[str] = ..., memories: _Optional[int] = ..., dense_tier: _Optional[str] = ..., dense_index: _Optional[str] = ..., ram_bytes: _Optional[int] = ..., idle_s: _Optional[float] = ..., load_ms: _Optional[float] = ..., log_bytes: _Optional[int] = ..., live_bytes: _Optional[int] = ..., compactions: _Optional[int] = ..., lexical_stale: _Optional[bool] = ..., queued: _Optional[int] = ..., rejected: _Optional[int] = ..., replica: _Optional[str] = ...) -> None: ...

class ReplicaStats(_message.Message):
    __slots__ = ("replica", "node_id", "pid", "loaded_tenants", "used_bytes", "rss_bytes", "disk_bytes")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    LOADED_TENANTS_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    replica: str
    node_id: str
    pid: int
    loaded_tenants: int
    used_bytes: int
    rss_bytes: int
    disk_bytes: int
    def __init__(self, replica: _Optional[str] = ..., node_id: _Optional[str] = ..., pid: _Optional[int] = ..., loaded_tenants: _Optional[int] = ..., used_bytes: _Optional[int] = ..., rss_bytes: _Optional[int] = ..., disk_bytes: _Optional[int] = ...) -> None: ...

class TenantDiskUsage(_message.Message):
    __slots__ = ("tenant_id", "log_bytes", "audit_bytes")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    AUDIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    log_bytes: int
    audit_bytes: int
    def __init__(self, tenant_id: _Optional[str] = ..., log_bytes: _Optional[int] = ..., audit_bytes: _Optional[int] = ...) -> None: ...

class StorageStats(_message.Message):
    __slots__ = ("free_bytes", "total_bytes", "min_free_bytes", "low", "writes_refused", "full_events", "log_bytes", "audit_bytes", "compactions", "top_tenants")
    FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MIN_FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    WRITES_REFUSED_FIELD_NUMBER: _ClassVar[int]
    FULL_EVENTS_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    AUDIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    COMPACTIONS_FIELD_NUMBER: _ClassVar[int]
    TOP_TENANTS_FIELD_NUMBER: _ClassVar[int]
    free_bytes: int
    total_bytes: int
    min_free_bytes: int
    low: bool
    writes_refused: int
    full_events: int
    log_bytes: int
    audit_bytes: int
    compactions: int
    top_tenants: _containers.RepeatedCompositeFieldContainer[TenantDiskUsage]
    def __init__(self, free_bytes: _Optional[int] = ..., total_bytes: _Optional[int] = ..., min_free_bytes: _Optional[int] = ..., low: _Optional[bool] = ..., writes_refused: _Optional[int] = ..., full_events: _Optional[int] = ..., log_bytes: _Optional[int] = ..., audit_bytes: _Optional[int] = ..., compactions: _Optional[int] = ..., top_tenants: _Optional[_Iterable[_Union[TenantDiskUsage, _Mapping]]] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("total_tenants", "loaded_tenants", "memory_budget_bytes", "used_bytes", "loads", "evictions", "load_ms_total", "evict_ms_total", "tenants", "storage", "replicas")
    TOTAL_TENANTS_FIELD_NUMBER: _ClassVar[int]
    LOADED_TENANTS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOADS_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    LOAD_MS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EVICT_MS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    total_tenants: int
    loaded_tenants: int
    memory_budget_bytes: int
    used_bytes: int
    loads: int
    evictions: int
    load_ms_total: float
    evict_ms_total: float
    tenants: _containers.RepeatedCompositeFieldContainer[TenantStats]
    storage: StorageStats
    replicas: _containers.RepeatedCompositeFieldContainer[ReplicaStats]
    def __init__(self, total_tenants: _Optional[int] = ..., loaded_tenants: _Optional[int] = ..., memory_budget_bytes: _Optional[int] = ..., used_bytes: _Optional[int] = ..., loads: _Optional[int] = ..., evictions: _Optional[int] = ..., load_ms_total: _Optional[float] = ..., evict_ms_total: _Optional[float] = ..., tenants: _Optional[_Iterable[_Union[TenantStats, _Mapping]]] = ..., storage: _Optional[_Union[StorageStats, _Mapping]] = ..., replicas: _Optional[_Iterable[_Union[ReplicaStats, _Mapping]]] = ...) -> None: ...

class ConsolidateRequest(_message.Message):
    __slots__ = ("tenant_id", "dry_run")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    dry_run: bool
    def __init__(self, tenant_id: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class Consolidation(_message.Message):
    __slots__ = ("memory_id", "consolidates", "content")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    consolidates: _containers.RepeatedScalarFieldContainer[str]
    content: str
    def __init__(self, memory_id: _Optional[str] = ..., consolidates: _Optional[_Iterable[str]] = ..., content: _Optional[str] = ...) -> None: ...

class ConsolidateResponse(_message.Message):
    __slots__ = ("clusters", "consolidated", "consolidations", "restored")
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATED_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATIONS_FIELD_NUMBER: _ClassVar[int]
    RESTORED_FIELD_NUMBER: _ClassVar[int]
    clusters: int
    consolidated: int
    consolidations: _containers.RepeatedCompositeFieldContainer[Consolidation]
    restored: int
    def __init__(self, clusters: _Optional[int] = ..., consolidated: _Optional[int] = ..., consolidations: _Optional[_Iterable[_Union[Consolidation, _Mapping]]] = ..., restored: _Optional[int] = ...) -> None: ...

class ExtractRequest(_message.Message):
    __slots__ = ("tenant_id", "conversation", "turns")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    conversation: str
    turns: int
    def __init__(self, tenant_id: _Optional[str] = ..., conversation: _Optional[str] = ..., turns: _Optional[int] = ...) -> None: ...

class ExtractResponse(_message.Message):
    __slots__ = ("memory_ids", "facts", "pending")
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    facts: int
    pending: int
    def __init__(self, memory_ids: _Optional[_Iterable[str]] = ..., facts: _Optional[int] = ..., pending: _Optional[int] = ...) -> None: ...

class TenantSettings(_message.Message):
    __slots__ = ("min_salience",)
    MIN_SALIENCE_FIELD_NUMBER: _ClassVar[int]
    min_salience: float
    def __init__(self, min_salience: _Optional[float] = ...) -> None: ...

class GetSettingsRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class UpdateSettingsRequest(_message.Message):
    __slots__ = ("tenant_id", "settings", "reset")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    settings: TenantSettings
    reset: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant_id: _Optional[str] = ..., settings: _Optional[_Union[TenantSettings, _Mapping]] = ..., reset: _Optional[_Iterable[str]] = ...) -> None: ...

class SettingsResponse(_message.Message):
    __slots__ = ("tenant_id", "settings", "effective")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    settings: TenantSettings
    effective: TenantSettings
    def __init__(self, tenant_id: _Optional[str] = ..., settings: _Optional[_Union[TenantSettings, _Mapping]] = ..., effective: _Optional[_Union[TenantSettings, _Mapping]] = ...) -> None: ...
