"""The asyncio client (grpc.aio): the same methods as ``EngramClient``, awaited."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc
from engram_client import _core
from engram_client._core import FilterLike, MemoryLike, Recall, RetryPolicy

log = logging.getLogger(__name__)


class AsyncEngramClient:
    """``async with AsyncEngramClient(address, key=KEY) as engram: await engram.recall(...)``.

    Create it inside the event loop that uses it (grpc.aio channels belong to one loop)."""

    def __init__(self, address: str = _core.DEFAULT_ADDRESS, *, key: str = "",
                 timeout_s: float = _core.DEFAULT_TIMEOUT_S, retry: RetryPolicy | None = None,
                 credentials: grpc.ChannelCredentials | None = None, options: Sequence[tuple[str, Any]] = (),
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        opts = [*_core.CHANNEL_OPTIONS, *options]
        self.address = address
        self.key = key
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self.channel = (grpc.aio.secure_channel(address, credentials, options=opts) if credentials is not None
                        else grpc.aio.insecure_channel(address, options=opts))
        self._stubs = {"MemoryService": sgrpc.MemoryServiceStub(self.channel),
                       "AdminService": sgrpc.AdminServiceStub(self.channel)}
        self._rpcs = _core.rpc_names()
        self._keyed = _core.keyed_rpcs()

    async def __aenter__(self) -> AsyncEngramClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def call(self, method: str, request: Message, *, timeout_s: float | None = None,
                   retry: RetryPolicy | None = None) -> Any:
        """Any RPC by name, with the key, deadline and retries (idempotency keys as ``EngramClient.call``)."""
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
                return await fn(request, timeout=attempts.next_timeout_s(), metadata=metadata)
            except grpc.RpcError as exc:
                delay = attempts.delay_after(exc)
                if delay is None:
                    raise
                log.debug("%s: %s, retry %d in %.2fs", method, exc.code(), attempts.attempt, delay)
                await self._sleep(delay)

    # -- MemoryService ---------------------------------------------------------------------------------
    async def info(self, *, timeout_s: float | None = None) -> spb.InfoResponse:
        return await self.call("Info", spb.InfoRequest(), timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def write(self, tenant_id: str, memories: Iterable[MemoryLike], *, timeout_s: float | None = None,
                    idempotency_key: str = "", **common: Any) -> spb.WriteResponse:
        request = _core.write_request(tenant_id, memories, common, idempotency_key=idempotency_key)
        return await self.call("Write", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def search(self, tenant_id: str, text: str, *, filter: FilterLike = None,  # noqa: A002
                     timeout_s: float | None = None, **options: Any) -> pb.QueryResult:
        return (await self.search_many(tenant_id, [_core.search_query(text, filter=filter, **options)],
                                       timeout_s=timeout_s))[0]

    async def search_many(self, tenant_id: str, queries: Sequence[str | pb.SearchQuery], *,
                          timeout_s: float | None = None, **options: Any) -> list[pb.QueryResult]:
        reply = await self.call("Search", _core.search_request(tenant_id, queries, options), timeout_s=timeout_s)
        return list(reply.results)

    async def get(self, tenant_id: str, memory_ids: Sequence[str], *,
                  timeout_s: float | None = None) -> spb.GetResponse:
        return await self.call("Get", spb.GetRequest(tenant_id=tenant_id, memory_ids=list(memory_ids)),  # type: ignore[no-any-return]
                               timeout_s=timeout_s)

    async def delete(self, tenant_id: str, memory_ids: Sequence[str], *, timeout_s: float | None = None,
                     idempotency_key: str = "") -> spb.DeleteResponse:
        request = spb.DeleteRequest(tenant_id=tenant_id, memory_ids=list(memory_ids), idempotency_key=idempotency_key)
        return await self.call("Delete", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def list_page(self, tenant_id: str, *, filter: FilterLike = None, page_size: int = 0,  # noqa: A002
                        page_token: str = "", timeout_s: float | None = None) -> spb.ListResponse:
        request = _core.list_request(tenant_id, filter=filter, page_size=page_size, page_token=page_token)
        return await self.call("List", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def iter_memories(self, tenant_id: str, *, filter: FilterLike = None,  # noqa: A002
                            page_size: int = 100) -> AsyncIterator[pb.Memory]:
        token = ""
        while True:
            page = await self.list_page(tenant_id, filter=filter, page_size=page_size, page_token=token)
            for memory in page.memories:
                yield memory
            token = page.next_page_token
            if not token:
                return

    # -- agent helpers ---------------------------------------------------------------------------------
    async def recall(self, tenant_id: str, text: str, *, top_k: int = 5, context_items: int = 0,
                     filter: FilterLike = None, include_pending: bool = False,  # noqa: A002
                     min_score: float = 0.0, gate: bool = True, **options: Any) -> Recall:
        query = _core.recall_query(text, top_k=top_k, context_items=context_items, filter=filter,
                                   include_pending=include_pending, options=options, gate=gate)
        return _core.recall_from((await self.search_many(tenant_id, [query]))[0], min_score=min_score)

    async def write_conversation(self, tenant_id: str, turns: Iterable[Any], *, conversation_id: str = "",
                                 start: int = 0, previous: str = "", timeout_s: float | None = None,
                                 **common: Any) -> spb.WriteResponse:
        """A conversation, one EPISODIC memory per turn with the previous turn as its context (see
        ``_core.conversation_inputs``); the server heads each with its date when indexing."""
        memories = _core.conversation_inputs(turns, conversation_id=conversation_id, start=start, previous=previous,
                                             **common)
        return await self.call("Write", spb.WriteRequest(tenant_id=tenant_id, memories=memories),  # type: ignore[no-any-return]
                               timeout_s=timeout_s)

    async def remember(self, tenant_id: str, content: str, *, type: str | int = "episodic",  # noqa: A002
                       **fields: Any) -> spb.WriteResult:
        reply = await self.call("Write", spb.WriteRequest(
            tenant_id=tenant_id, memories=[_core.remember_input(content, type=type, **fields)]))
        return reply.results[0]  # type: ignore[no-any-return]

    # -- AdminService ----------------------------------------------------------------------------------
    async def create_tenant(self, tenant_id: str, initial: Iterable[MemoryLike] = (), *,
                            timeout_s: float | None = None) -> spb.CreateTenantResponse:
        request = _core.create_tenant_request(tenant_id, initial)
        return await self.call("CreateTenant", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def list_tenants(self, *, timeout_s: float | None = None) -> list[str]:
        return list((await self.call("ListTenants", spb.ListTenantsRequest(), timeout_s=timeout_s)).tenant_ids)

    async def create_key(self, name: str, *, tenant_ids: Sequence[str] = (), prefixes: Sequence[str] = (),
                         admin: bool = False, timeout_s: float | None = None) -> spb.CreateKeyResponse:
        request = spb.CreateKeyRequest(name=name, tenant_ids=list(tenant_ids), tenant_prefixes=list(prefixes),
                                       admin=admin)
        return await self.call("CreateKey", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def revoke_key(self, key_id: str, *, timeout_s: float | None = None) -> spb.RevokeKeyResponse:
        return await self.call("RevokeKey", spb.RevokeKeyRequest(key_id=key_id), timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def rotate_key(self, key_id: str, *, timeout_s: float | None = None) -> spb.RotateKeyResponse:
        return await self.call("RotateKey", spb.RotateKeyRequest(key_id=key_id), timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def delete_tenant(self, tenant_id: str, *, timeout_s: float | None = None) -> Any:
        return await self.call("DeleteTenant", spb.DeleteTenantRequest(tenant_id=tenant_id), timeout_s=timeout_s)

    async def stats(self, tenant_id: str = "", *, timeout_s: float | None = None) -> Any:
        return await self.call("Stats", spb.StatsRequest(tenant_id=tenant_id), timeout_s=timeout_s)

    # -- memory lifecycle ------------------------------------------------------------------------------
    async def history(self, tenant_id: str, memory_id: str, *,
                      timeout_s: float | None = None) -> spb.HistoryResponse:
        return await self.call("History", spb.HistoryRequest(tenant_id=tenant_id, memory_id=memory_id),  # type: ignore[no-any-return]
                               timeout_s=timeout_s)

    async def confirm(self, tenant_id: str, memory_ids: Sequence[str], *, timeout_s: float | None = None,
                      idempotency_key: str = "") -> spb.ConfirmResponse:
        request = spb.ConfirmRequest(tenant_id=tenant_id, memory_ids=list(memory_ids), idempotency_key=idempotency_key)
        return await self.call("Confirm", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def link_update(self, tenant_id: str, memory_id: str, updates_id: str, *, unlink: bool = False,
                          timeout_s: float | None = None) -> spb.LinkUpdateResponse:
        """Makes ``memory_id`` update ``updates_id``, or with ``unlink`` removes that link (EngramClient.link_update)."""
        request = spb.LinkUpdateRequest(tenant_id=tenant_id, memory_id=memory_id, updates_id=updates_id, unlink=unlink)
        return await self.call("LinkUpdate", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def touch(self, tenant_id: str, memory_ids: Sequence[str], *,
                    timeout_s: float | None = None) -> spb.TouchResponse:
        """Marks memories as used (e.g. the ones put into a prompt): one access each, what recency reads."""
        return await self.call("Touch", spb.TouchRequest(tenant_id=tenant_id, memory_ids=list(memory_ids)),  # type: ignore[no-any-return]
                               timeout_s=timeout_s)

    async def consolidate(self, tenant_id: str, *, dry_run: bool = False,
                  timeout_s: float | None = None) -> spb.ConsolidateResponse:
        """Folds repeated episodic memories into semantic ones now (README "Memory hygiene")."""
        return await self.call("Consolidate", spb.ConsolidateRequest(tenant_id=tenant_id, dry_run=dry_run),  # type: ignore[no-any-return]
                         timeout_s=timeout_s)

    async def extract(self, tenant_id: str, *, conversation: str = "", turns: int = 0,
              timeout_s: float | None = None) -> spb.ExtractResponse:
        """Runs the server's configured extractor on a conversation's recent turns now."""
        request = spb.ExtractRequest(tenant_id=tenant_id, conversation=conversation, turns=turns)
        return await self.call("Extract", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def get_settings(self, tenant_id: str, *, timeout_s: float | None = None) -> spb.SettingsResponse:
        """The tenant's own settings (``settings``; unset fields follow the server) and ``effective``: what applies."""
        request = spb.GetSettingsRequest(tenant_id=tenant_id)
        return await self.call("GetSettings", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def update_settings(self, tenant_id: str, *, min_salience: float | None = None, reset: Sequence[str] = (),
                              timeout_s: float | None = None) -> spb.SettingsResponse:
        """Per-tenant settings, applied together or not at all: ``min_salience`` skips writes below it (0 = never);
        ``reset=["min_salience"]`` returns to the server's ``memory.min_salience``."""
        request = _core.update_settings_request(tenant_id, min_salience=min_salience, reset=reset)
        return await self.call("UpdateSettings", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def forget(self, tenant_id: str, *, filter: FilterLike = None, older_than_ms: int = 0,  # noqa: A002
                     delete: bool = False, include_pinned: bool = False, all: bool = False,  # noqa: A002
                     dry_run: bool = False, timeout_s: float | None = None,
                     idempotency_key: str = "") -> spb.ForgetResponse:
        request = _core.forget_request(tenant_id, filter=filter, older_than_ms=older_than_ms, delete=delete,
                                       include_pinned=include_pinned, all=all, dry_run=dry_run,
                                       idempotency_key=idempotency_key)
        return await self.call("Forget", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def audit_page(self, tenant_id: str, *, ops: Sequence[str | int] = (), memory_id: str = "",
                         page_size: int = 0, page_token: str = "",
                         timeout_s: float | None = None) -> spb.AuditResponse:
        request = _core.audit_request(tenant_id, ops=ops, memory_id=memory_id, page_size=page_size,
                                      page_token=page_token)
        return await self.call("Audit", request, timeout_s=timeout_s)  # type: ignore[no-any-return]

    async def iter_audit(self, tenant_id: str, *, ops: Sequence[str | int] = (), memory_id: str = "",
                         page_size: int = 100) -> AsyncIterator[spb.AuditEntry]:
        token = ""
        while True:
            page = await self.audit_page(tenant_id, ops=ops, memory_id=memory_id, page_size=page_size,
                                         page_token=token)
            for entry in page.entries:
                yield entry
            token = page.next_page_token
            if not token:
                return
