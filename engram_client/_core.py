"""What the sync and async clients share: RPC lookup, retry policy, metadata and request builders.

Everything here is pure (no I/O) and needs only grpcio, protobuf and the generated stubs. The two
clients differ only in how they wait: ``client.py`` blocks, ``aio.py`` awaits.
"""

from __future__ import annotations

import copy
import random
import secrets
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

SERVICES = ("MemoryService", "AdminService")
DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 30.0
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
)

MemoryLike = str | Mapping[str, Any] | pb.MemoryInput
ClientT = TypeVar("ClientT")
FilterLike = Mapping[str, Any] | pb.Filter | None


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, on the listed status codes only, at most ``max_attempts``
    attempts; ``timeout_s`` bounds the whole call, retries included.

    An UNAVAILABLE or DEADLINE_EXCEEDED call has an *unknown outcome*: the server may have applied it
    before the answer was lost (a replica killed mid-call, a deadline that passed during the commit). So
    ``codes`` (default UNAVAILABLE and DEADLINE_EXCEEDED) are retried only for calls that are safe to
    repeat: reads, and the mutating calls that carry an idempotency key (Write, Delete, Forget, Confirm:
    the client puts a fresh key on each, kept across its retries, so the server applies it once and
    answers the retry with the first answer). The other mutating calls (CreateTenant, CreateKey, Touch,
    ...) have no key: they are retried on ``unkeyed_codes`` only (default UNAVAILABLE: the server was not
    reached, or a rare mid-call death, after which a Touch may count twice or a CreateKey leave an unused
    key), never on a deadline. INVALID_ARGUMENT, NOT_FOUND and the like are never retried.

    ``attempt_timeout_s``: a deadline per attempt (None: each attempt gets what is left of the call's),
    so that one hung attempt leaves time for another."""

    max_attempts: int = 5
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    codes: frozenset[grpc.StatusCode] = field(default_factory=lambda: frozenset(
        {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}))
    unkeyed_codes: frozenset[grpc.StatusCode] = field(default_factory=lambda: frozenset({grpc.StatusCode.UNAVAILABLE}))
    attempt_timeout_s: float | None = None

    def backoff_s(self, attempt: int, *, rng: random.Random | None = None) -> float:
        """Delay before retry number ``attempt`` (1-based): uniform in [0, min(max, initial·mult^(n-1))]."""
        cap = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))
        return (rng or random).uniform(0.0, cap)

    def should_retry(self, code: grpc.StatusCode, attempt: int, *, idempotent: bool = True) -> bool:
        """``idempotent``: the call is safe to repeat (a read, or a mutating call with an idempotency key)."""
        return code in (self.codes if idempotent else self.unkeyed_codes) and attempt < self.max_attempts


NO_RETRY = RetryPolicy(max_attempts=1)


# Calls that change nothing: safe to repeat without a key (a Search's access counts are a ranking signal).
READS = frozenset({"Info", "Search", "Get", "List", "History", "Audit", "GetSettings", "ListTenants", "Stats"})
IDEMPOTENCY_FIELD = "idempotency_key"


def keyed_rpcs() -> frozenset[str]:
    """The RPCs whose request has an idempotency key (read from the descriptors: Write, Delete, Forget,
    Confirm, and any RPC that gains the field later)."""
    return frozenset(method.name for service_name in SERVICES
                     for method in spb.DESCRIPTOR.services_by_name[service_name].methods
                     if IDEMPOTENCY_FIELD in method.input_type.fields_by_name)


def new_idempotency_key() -> str:
    """A fresh key: 32 hex characters (128 random bits), what the server accepts ([A-Za-z0-9._:~-], ≤ 128)."""
    return secrets.token_hex(16)


def with_idempotency_key(request: Message, key: str = "") -> Message:
    """The request with an idempotency key: its own when it has one, else ``key``, else a fresh one. A copy:
    the caller's message is left as it is, so sending it again later is a new call, not a retry."""
    if getattr(request, IDEMPOTENCY_FIELD):
        return request
    keyed = type(request)()
    keyed.CopyFrom(request)
    setattr(keyed, IDEMPOTENCY_FIELD, key or new_idempotency_key())
    return keyed


def prepare_call(method: str, request: Message, keyed: frozenset[str]) -> tuple[Message, bool]:
    """The request as it is sent (an RPC in ``keyed`` gets its idempotency key here, once, so every retry
    carries the same one) and whether the call is safe to repeat."""
    if method in keyed:
        return with_idempotency_key(request), True
    return request, method in READS


def rpc_names() -> dict[str, str]:
    """Every RPC in the proto, by method name → service name (read from the descriptors, so an RPC
    added to the proto is callable through ``client.call`` without touching the SDK)."""
    out: dict[str, str] = {}
    for service_name in SERVICES:
        for method in spb.DESCRIPTOR.services_by_name[service_name].methods:
            out[method.name] = service_name
    return out


def response_class(service: str, method: str) -> type[Message]:
    descriptor = spb.DESCRIPTOR.services_by_name[service].methods_by_name[method].output_type
    return _message_class(descriptor.name)


def _message_class(name: str) -> type[Message]:
    cls = getattr(spb, name, None) or getattr(pb, name)
    return cls  # type: ignore[no-any-return]


def with_key(client: ClientT, key: str) -> ClientT:
    """The same client (channel, deadline, retries) calling with another key, e.g. one server acting for
    many keys. It shares the channel: close only the original."""
    other = copy.copy(client)
    other.key = key  # type: ignore[attr-defined]
    return other


def call_metadata(key: str, request_id: str | None = None) -> list[tuple[str, str]]:
    """Bearer key plus an ``x-request-id`` that stays the same across retries of one call, and the caller's
    W3C trace context (:func:`trace_metadata`)."""
    out = [("x-request-id", request_id or secrets.token_hex(8))]
    if key:
        out.append(("authorization", f"Bearer {key}"))
    return out + trace_metadata()


TRACE_HEADERS = ("traceparent", "tracestate")


def trace_metadata() -> list[tuple[str, str]]:
    """``traceparent`` / ``tracestate`` of the caller's current OpenTelemetry span, so the server's spans join
    the caller's trace. Only where the application uses OpenTelemetry (``opentelemetry.trace`` already imported:
    the client never imports it itself, nor needs it) and a span is current; else nothing."""
    if "opentelemetry.trace" not in sys.modules:
        return []
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return []
    carrier: dict[str, str] = {}
    propagate.inject(carrier)   # the application's propagators (OTEL_PROPAGATORS; default W3C trace context)
    return [(k, carrier[k]) for k in TRACE_HEADERS if k in carrier]


# -- request builders -----------------------------------------------------------------------------------

def enum_value(enum_name: str, value: str | int) -> int:
    """``"episodic"``, ``"EPISODIC"`` or ``"MEMORY_TYPE_EPISODIC"`` → its number (ints pass through)."""
    if isinstance(value, int):
        return value
    enum = pb.DESCRIPTOR.enum_types_by_name[enum_name]
    prefix = {"MemoryType": "MEMORY_TYPE_", "MemoryStatus": "MEMORY_STATUS_"}[enum_name]
    name = value.strip().upper()
    name = name if name.startswith(prefix) else prefix + name
    found = enum.values_by_name.get(name)
    if found is None:
        choices = ", ".join(v.name[len(prefix):].lower() for v in enum.values if v.number)
        raise ValueError(f"unknown {enum_name} {value!r}; one of: {choices}")
    return int(found.number)


def memory_input(value: MemoryLike) -> pb.MemoryInput:
    """A string (content only), a dict in MemoryInput's shape (``type`` may be ``"episodic"``), or the
    message itself."""
    if isinstance(value, pb.MemoryInput):
        return value
    if isinstance(value, str):
        return pb.MemoryInput(content=value)
    data = dict(value)
    if "type" in data and data["type"] is not None:
        data["type"] = enum_value("MemoryType", data["type"])
    return json_format.ParseDict(data, pb.MemoryInput())


def conversation_inputs(turns: Iterable[Any], *, conversation_id: str = "", start: int = 0,
                        previous: str = "", **common: Any) -> list[pb.MemoryInput]:
    """One EPISODIC memory per turn, ``"<speaker>: <text>"``, with the previous turn as its ``context`` (indexed
    with it, never returned as its content). A turn is ``(speaker, text)`` or a dict with ``speaker``, ``text``
    and optionally ``created_at_ms``, ``source_ref``, ``entities``, ``importance``. ``source_ref`` defaults to
    ``"<conversation_id>#<n>"`` (n counts from ``start``); ``previous`` is the turn before the first one given
    (when a conversation is written in several calls)."""
    out: list[pb.MemoryInput] = []
    for n, turn in enumerate(turns, start=start):
        fields = dict(turn) if isinstance(turn, Mapping) else {"speaker": turn[0], "text": turn[1]}
        speaker, text = str(fields.pop("speaker", "")).strip(), str(fields.pop("text", "")).strip()
        said = f"{speaker}: {text}" if speaker else text
        if conversation_id and "source_ref" not in fields:
            fields["source_ref"] = f"{conversation_id}#{n}"
        out.append(memory_input({"type": "episodic", **common, **fields, "content": said, "context": previous}))
        previous = said
    return out


def memory_filter(value: FilterLike) -> pb.Filter:
    if value is None:
        return pb.Filter()
    if isinstance(value, pb.Filter):
        return value
    data = dict(value)
    if "types" in data:
        data["types"] = [enum_value("MemoryType", t) for t in data["types"]]
    if "statuses" in data:
        data["statuses"] = [enum_value("MemoryStatus", s) for s in data["statuses"]]
    return json_format.ParseDict(data, pb.Filter())


def write_request(tenant_id: str, memories: Iterable[MemoryLike], common: Mapping[str, Any], *,
                  idempotency_key: str = "") -> spb.WriteRequest:
    """``common`` fields apply to every memory that does not set them itself."""
    items = []
    for m in memories:
        item = memory_input(m)
        if common:
            merged = memory_input(common)
            merged.MergeFrom(item)
            item = merged
        items.append(item)
    return spb.WriteRequest(tenant_id=tenant_id, memories=items, idempotency_key=idempotency_key)


def search_query(text: str, *, filter: FilterLike = None, **options: Any) -> pb.SearchQuery:  # noqa: A002
    """A SearchQuery; ``options`` are SearchQuery fields (top_k, rerank_depth, context_block, ...);
    ``scoring`` may be a dict."""
    scoring = options.pop("scoring", None)
    query = pb.SearchQuery(text=text, filter=memory_filter(filter), **options)
    if scoring is not None:
        query.scoring.CopyFrom(scoring if isinstance(scoring, pb.Scoring)
                               else json_format.ParseDict(dict(scoring), pb.Scoring()))
    return query


def search_request(tenant_id: str, queries: Sequence[str | pb.SearchQuery], options: Mapping[str, Any]
                   ) -> spb.SearchRequest:
    built = [q if isinstance(q, pb.SearchQuery) else search_query(q, **dict(options)) for q in queries]
    return spb.SearchRequest(tenant_id=tenant_id, queries=built)


def create_tenant_request(tenant_id: str, initial: Iterable[MemoryLike]) -> spb.CreateTenantRequest:
    return spb.CreateTenantRequest(tenant_id=tenant_id, initial_memories=[memory_input(m) for m in initial])


def list_request(tenant_id: str, *, filter: FilterLike, page_size: int,  # noqa: A002
                 page_token: str) -> spb.ListRequest:
    return spb.ListRequest(tenant_id=tenant_id, filter=memory_filter(filter), page_size=page_size,
                           page_token=page_token)


def remember_input(content: str, *, type: str | int = "episodic", **fields: Any) -> pb.MemoryInput:  # noqa: A002
    data = {k: v for k, v in fields.items() if v is not None}
    return memory_input({"content": content, "type": type, **data})


@dataclass(frozen=True)
class Recall:
    """What an agent reads before answering: the ranked hits and a prompt-ready context block."""

    hits: list[pb.Hit]
    context: str
    timings: pb.Timings
    skipped: str = ""     # the recall gate found the text needs no memory (e.g. "small talk"); no search ran

    @property
    def memories(self) -> list[pb.Memory]:
        return [h.memory for h in self.hits]

    def __bool__(self) -> bool:
        return bool(self.hits)


def recall_from(result: pb.QueryResult, *, min_score: float) -> Recall:
    hits = [h for h in result.hits if h.breakdown.final >= min_score]
    context = result.context_block if len(hits) == len(result.hits) else ""
    return Recall(hits=hits, context=context or context_from_hits(hits), timings=result.timings,
                  skipped=result.skipped)


def context_from_hits(hits: Sequence[pb.Hit]) -> str:
    """A prompt-ready block, for servers that send none: one line per memory, best first."""
    if not hits:
        return ""
    lines = ["Relevant memories (most relevant first):"]
    for h in hits:
        m = h.memory
        kind = pb.MemoryType.Name(m.type).removeprefix("MEMORY_TYPE_").lower()
        when = time.strftime("%Y-%m-%d", time.gmtime(m.created_at_ms / 1000)) if m.created_at_ms else "?"
        lines.append(f"- [{kind}, {when}] {m.content}")
    return "\n".join(lines)


def recall_query(text: str, *, top_k: int, context_items: int, filter: FilterLike,  # noqa: A002
                 include_pending: bool, options: Mapping[str, Any], gate: bool = True) -> pb.SearchQuery:
    """A recall is gated by default: small talk comes back at once with no hits (``Recall.skipped``)."""
    return search_query(text, top_k=top_k, context_block=True, context_items=context_items or top_k,
                        filter=filter, include_pending=include_pending, gate=gate, **dict(options))


class Attempts:
    """One logical call's retry bookkeeping: each attempt gets what is left of the overall deadline (at
    most the policy's ``attempt_timeout_s``). ``idempotent``: the call is safe to repeat (see RetryPolicy)."""

    def __init__(self, policy: RetryPolicy, timeout_s: float, *, idempotent: bool = True, clock: Any = None) -> None:
        self._clock = clock or time.monotonic
        self.policy = policy
        self.idempotent = idempotent
        self.deadline = self._clock() + timeout_s
        self.attempt = 0

    def next_timeout_s(self) -> float:
        self.attempt += 1
        left = max(self.deadline - self._clock(), 0.001)
        return left if self.policy.attempt_timeout_s is None else min(left, self.policy.attempt_timeout_s)

    def delay_after(self, error: grpc.RpcError) -> float | None:
        """Seconds to wait before the next attempt, or None to give up and raise ``error``."""
        code = error.code() if hasattr(error, "code") else None
        if code is None or not self.policy.should_retry(code, self.attempt, idempotent=self.idempotent):
            return None
        delay = self.policy.backoff_s(self.attempt)
        return delay if self._clock() + delay < self.deadline else None


def unknown_rpc(method: str) -> ValueError:
    return ValueError(f"no RPC named {method!r}; known: {', '.join(sorted(rpc_names()))}")


def forget_request(tenant_id: str, *, filter: FilterLike, older_than_ms: int, delete: bool,  # noqa: A002
                   include_pinned: bool, all: bool, dry_run: bool, idempotency_key: str = "") -> Message:  # noqa: A002
    mode = spb.FORGET_MODE_DELETE if delete else spb.FORGET_MODE_ARCHIVE
    return spb.ForgetRequest(tenant_id=tenant_id, filter=memory_filter(filter), older_than_ms=older_than_ms,
                             mode=mode, include_pinned=include_pinned, all=all, dry_run=dry_run,
                             idempotency_key=idempotency_key)


def update_settings_request(tenant_id: str, *, min_salience: float | None, reset: Sequence[str]) -> Message:
    """Sets what is given (None: leave as it is) and returns ``reset``'s names to the server's default."""
    settings = spb.TenantSettings(min_salience=min_salience) if min_salience is not None else spb.TenantSettings()
    return spb.UpdateSettingsRequest(tenant_id=tenant_id, settings=settings, reset=list(reset))


def audit_request(tenant_id: str, *, ops: Sequence[str | int], memory_id: str, page_size: int,
                  page_token: str) -> Message:
    def code(op: str | int) -> Any:
        return op if isinstance(op, int) else spb.AuditOp.Value("AUDIT_OP_" + op.upper().removeprefix("AUDIT_OP_"))

    codes = [code(op) for op in ops]
    return spb.AuditRequest(tenant_id=tenant_id, ops=codes, memory_id=memory_id, page_size=page_size,
                            page_token=page_token)
