"""The blocking client. ``AsyncEngramClient`` (aio.py) has the same methods, awaited."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc
from engram_client import _core
from engram_client._core import FilterLike, MemoryLike, Recall, RetryPolicy

log = logging.getLogger(__name__)


class EngramClient:
    """A blocking engram client: one channel, the bearer key on every call, safe retries (``RetryPolicy``).

    >>> with EngramClient("127.0.0.1:50051", key=KEY) as engram:
    ...     engram.remember("alice", "Alice is allergic to peanuts", type="semantic", importance=0.9)
    ...     engram.recall("alice", "what should I not cook for Alice?").context
    """

    def __init__(self, address: str = _core.DEFAULT_ADDRESS, *, key: str = "",
                 timeout_s: float = _core.DEFAULT_TIMEOUT_S, retry: RetryPolicy | None = None,
                 credentials: grpc.ChannelCredentials | None = None,
                 options: Sequence[tuple[str, Any]] = (), sleep: Callable[[float], None] = time.sleep) -> None:
        opts = [*_core.CHANNEL_OPTIONS, *options]
        self.address = address
        self.key = key
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self.channel = (grpc.secure_channel(address, credentials, options=opts) if credentials is not None
                        else grpc.insecure_channel(address, options=opts))
        self._stubs = {"MemoryService": sgrpc.MemoryServiceStub(self.channel),
                       "AdminService": sgrpc.AdminServiceStub(self.channel)}
        self._rpcs = _core.rpc_names()
        self._keyed = _core.keyed_rpcs()

    def __enter__(self) -> EngramClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    # -- the one place that calls the network --------------------------------------------------------
    def call(self, method: str, request: Message, *, timeout_s: float | None = None,
             retry: RetryPolicy | None = None) -> Any:
        """Any RPC by name (``"Write"``, ``"CreateTenant"``, ...), with the key, deadline and retries. A request
        of Write, Delete, Forget or Confirm without an idempotency key gets a fresh one (on a copy), the same
        for all its retries (see ``RetryPolicy``)."""
        service = self._rpcs.get(method)
        if service is None:
            raise _core.unknown_rpc(method)
        fn = getattr(self._stubs[service], method)
        request, idempotent = _core.prepare_call(method, request, self._keyed)
        attempts = _core.Attempts(retry or self.retry, self.timeout_s if timeout_s is None else timeout_s,
                                  idempotent=idempotent)
        metadata = _core.call_metadata(self.key)
        while True:
            try:
                return fn(request, timeout=attempts.next_timeout_s(), metadata=metadata)
            except grpc.RpcError as exc:
                delay = attempts.delay_after(exc)
                if delay is None:
                    raise
                log.debug("%s: %s, retry %d in %.2fs", method, exc.code(), attempts.attempt, delay)
                self._sleep(delay)

    # -- MemoryService ---------------------------------------------------------------------------------
    def info(self, *, timeout_s: float | None = None) -> spb.InfoResponse:
        return self.call("Info", spb.InfoRequest(), timeout_s=timeout_s)  # type: ignore[no-any-return]

    def write(self, tenant_id: str, memories: Iterable[MemoryLike], *, timeout_s: float | None = None,
              idempotency_key: str = "", **common: Any) -> spb.WriteResponse:
        """Writes memories (strings, dicts or MemoryInput); ``common`` fields apply to each. ``idempotency_key``:
        your own (e.g. to retry across restarts of your process); by default a fresh one per call."""
        request = _core.write_request(tenant_id, memories, common, idempotency_key=idempotency_key)
        return self.call("Write", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def search(self, tenant_id: str, text: str, *, filter: FilterLike = None,  # noqa: A002
               timeout_s: float | None = None, **options: Any) -> pb.QueryResult:
        """One query; ``options`` are SearchQuery fields (top_k, rerank_depth, context_block, scoring...)."""
        return self.search_many(tenant_id, [_core.search_query(text, filter=filter, **options)],
                                timeout_s=timeout_s)[0]

    def search_many(self, tenant_id: str, queries: Sequence[str | pb.SearchQuery], *,
                    timeout_s: float | None = None, **options: Any) -> list[pb.QueryResult]:
        reply = self.call("Search", _core.search_request(tenant_id, queries, options), timeout_s=timeout_s)
        return list(reply.results)

    def get(self, tenant_id: str, memory_ids: Sequence[str], *, timeout_s: float | None = None) -> spb.GetResponse:
        return self.call("Get", spb.GetRequest(tenant_id=tenant_id, memory_ids=list(memory_ids)),  # type: ignore[no-any-return]
                         timeout_s=timeout_s)

    def delete(self, tenant_id: str, memory_ids: Sequence[str], *, timeout_s: float | None = None,
               idempotency_key: str = "") -> spb.DeleteResponse:
        request = spb.DeleteRequest(tenant_id=tenant_id, memory_ids=list(memory_ids), idempotency_key=idempotency_key)
        return self.call("Delete", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def list_page(self, tenant_id: str, *, filter: FilterLike = None, page_size: int = 0,  # noqa: A002
                  page_token: str = "", timeout_s: float | None = None) -> spb.ListResponse:
        request = _core.list_request(tenant_id, filter=filter, page_size=page_size, page_token=page_token)
        return self.call("List", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def iter_memories(self, tenant_id: str, *, filter: FilterLike = None,  # noqa: A002
                      page_size: int = 100) -> Iterator[pb.Memory]:
        """Every memory the filter matches (all statuses when ``filter`` sets none), page by page."""
        token = ""
        while True:
            page = self.list_page(tenant_id, filter=filter, page_size=page_size, page_token=token)
            yield from page.memories
            token = page.next_page_token
            if not token:
                return

    # -- agent helpers ---------------------------------------------------------------------------------
    def recall(self, tenant_id: str, text: str, *, top_k: int = 5, context_items: int = 0,
               filter: FilterLike = None, include_pending: bool = False,  # noqa: A002
               min_score: float = 0.0, gate: bool = True, **options: Any) -> Recall:
        """Before answering: the memories that matter for ``text`` and a prompt-ready context block."""
        query = _core.recall_query(text, top_k=top_k, context_items=context_items, filter=filter,
                                   include_pending=include_pending, options=options, gate=gate)
        return _core.recall_from(self.search_many(tenant_id, [query])[0], min_score=min_score)

    def write_conversation(self, tenant_id: str, turns: Iterable[Any], *, conversation_id: str = "",
                           start: int = 0, previous: str = "", timeout_s: float | None = None,
                           **common: Any) -> spb.WriteResponse:
        """A conversation, one EPISODIC memory per turn with the previous turn as its context (see
        ``_core.conversation_inputs``); the server heads each with its date when indexing."""
        memories = _core.conversation_inputs(turns, conversation_id=conversation_id, start=start, previous=previous,
                                             **common)
        return self.call("Write", spb.WriteRequest(tenant_id=tenant_id, memories=memories),  # type: ignore[no-any-return]
                         timeout_s=timeout_s)

    def remember(self, tenant_id: str, content: str, *, type: str | int = "episodic",  # noqa: A002
                 **fields: Any) -> spb.WriteResult:
        """After answering: store what was learned (fields: importance, entities, source_ref, key, ...)."""
        reply = self.call("Write", spb.WriteRequest(tenant_id=tenant_id,
                                                    memories=[_core.remember_input(content, type=type, **fields)]))
        return reply.results[0]  # type: ignore[no-any-return]

    # -- AdminService ----------------------------------------------------------------------------------
    def create_tenant(self, tenant_id: str, initial: Iterable[MemoryLike] = (), *,
                      timeout_s: float | None = None) -> spb.CreateTenantResponse:
        request = _core.create_tenant_request(tenant_id, initial)
        return self.call("CreateTenant", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def list_tenants(self, *, timeout_s: float | None = None) -> list[str]:
        return list(self.call("ListTenants", spb.ListTenantsRequest(), timeout_s=timeout_s).tenant_ids)

    def create_key(self, name: str, *, tenant_ids: Sequence[str] = (), prefixes: Sequence[str] = (),
                   admin: bool = False, timeout_s: float | None = None) -> spb.CreateKeyResponse:
        request = spb.CreateKeyRequest(name=name, tenant_ids=list(tenant_ids), tenant_prefixes=list(prefixes),
                                       admin=admin)
        return self.call("CreateKey", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def revoke_key(self, key_id: str, *, timeout_s: float | None = None) -> spb.RevokeKeyResponse:
        return self.call("RevokeKey", spb.RevokeKeyRequest(key_id=key_id), timeout_s=timeout_s)  # type: ignore[no-any-return]

    def rotate_key(self, key_id: str, *, timeout_s: float | None = None) -> spb.RotateKeyResponse:
        return self.call("RotateKey", spb.RotateKeyRequest(key_id=key_id), timeout_s=timeout_s)  # type: ignore[no-any-return]

    def delete_tenant(self, tenant_id: str, *, timeout_s: float | None = None) -> Any:
        return self.call("DeleteTenant", spb.DeleteTenantRequest(tenant_id=tenant_id), timeout_s=timeout_s)

    def stats(self, tenant_id: str = "", *, timeout_s: float | None = None) -> Any:
        return self.call("Stats", spb.StatsRequest(tenant_id=tenant_id), timeout_s=timeout_s)

    # -- memory lifecycle ------------------------------------------------------------------------------
    def history(self, tenant_id: str, memory_id: str, *, timeout_s: float | None = None) -> spb.HistoryResponse:
        return self.call("History", spb.HistoryRequest(tenant_id=tenant_id, memory_id=memory_id),  # type: ignore[no-any-return]
                         timeout_s=timeout_s)

    def confirm(self, tenant_id: str, memory_ids: Sequence[str], *, timeout_s: float | None = None,
                idempotency_key: str = "") -> spb.ConfirmResponse:
        request = spb.ConfirmRequest(tenant_id=tenant_id, memory_ids=list(memory_ids), idempotency_key=idempotency_key)
        return self.call("Confirm", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def link_update(self, tenant_id: str, memory_id: str, updates_id: str, *, unlink: bool = False,
                    timeout_s: float | None = None) -> spb.LinkUpdateResponse:
        """Makes ``memory_id`` (the newer memory) update ``updates_id`` (the older one), or with ``unlink``
        removes that link: the way to undo a link the server made at write time (docs/concepts/updates.md)."""
        request = spb.LinkUpdateRequest(tenant_id=tenant_id, memory_id=memory_id, updates_id=updates_id, unlink=unlink)
        return self.call("LinkUpdate", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def touch(self, tenant_id: str, memory_ids: Sequence[str], *, timeout_s: float | None = None) -> spb.TouchResponse:
        """Marks memories as used (e.g. the ones put into a prompt): one access each, what recency reads."""
        return self.call("Touch", spb.TouchRequest(tenant_id=tenant_id, memory_ids=list(memory_ids)),  # type: ignore[no-any-return]
                         timeout_s=timeout_s)

    def consolidate(self, tenant_id: str, *, dry_run: bool = False,
                  timeout_s: float | None = None) -> spb.ConsolidateResponse:
        """Folds repeated episodic memories into semantic ones now (README "Memory hygiene")."""
        return self.call("Consolidate", spb.ConsolidateRequest(tenant_id=tenant_id, dry_run=dry_run),  # type: ignore[no-any-return]
                         timeout_s=timeout_s)

    def extract(self, tenant_id: str, *, conversation: str = "", turns: int = 0,
              timeout_s: float | None = None) -> spb.ExtractResponse:
        """Runs the server's configured extractor on a conversation's recent turns now."""
        request = spb.ExtractRequest(tenant_id=tenant_id, conversation=conversation, turns=turns)
        return self.call("Extract", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def get_settings(self, tenant_id: str, *, timeout_s: float | None = None) -> spb.SettingsResponse:
        """The tenant's own settings (``settings``; unset fields follow the server) and ``effective``: what applies."""
        request = spb.GetSettingsRequest(tenant_id=tenant_id)
        return self.call("GetSettings", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def update_settings(self, tenant_id: str, *, min_salience: float | None = None, reset: Sequence[str] = (),
                        timeout_s: float | None = None) -> spb.SettingsResponse:
        """Per-tenant settings, applied together or not at all: ``min_salience`` skips writes below it (0 = never);
        ``reset=["min_salience"]`` returns to the server's ``memory.min_salience``."""
        request = _core.update_settings_request(tenant_id, min_salience=min_salience, reset=reset)
        return self.call("UpdateSettings", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def forget(self, tenant_id: str, *, filter: FilterLike = None, older_than_ms: int = 0,  # noqa: A002
               delete: bool = False, include_pinned: bool = False, all: bool = False,  # noqa: A002
               dry_run: bool = False, timeout_s: float | None = None, idempotency_key: str = "") -> spb.ForgetResponse:
        request = _core.forget_request(tenant_id, filter=filter, older_than_ms=older_than_ms, delete=delete,
                                       include_pinned=include_pinned, all=all, dry_run=dry_run,
                                       idempotency_key=idempotency_key)
        return self.call("Forget", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def audit_page(self, tenant_id: str, *, ops: Sequence[str | int] = (), memory_id: str = "",
                   page_size: int = 0, page_token: str = "", timeout_s: float | None = None) -> spb.AuditResponse:
        request = _core.audit_request(tenant_id, ops=ops, memory_id=memory_id, page_size=page_size,
                                      page_token=page_token)
        return self.call("Audit", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def iter_audit(self, tenant_id: str, *, ops: Sequence[str | int] = (), memory_id: str = "",
                   page_size: int = 100) -> Iterator[spb.AuditEntry]:
        """The tenant's audit log, oldest first, page by page."""
        token = ""
        while True:
            page = self.audit_page(tenant_id, ops=ops, memory_id=memory_id, page_size=page_size, page_token=token)
            yield from page.entries
            token = page.next_page_token
            if not token:
                return
