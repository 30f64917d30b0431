"""gRPC servicers: parse the request, call the engine, prepare the reply. No logic of their own."""

from __future__ import annotations

import time

import grpc

from server.engine.engine import Engine
from server.grpc import mapping
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc
from server.grpc.interceptors import principal

VERSION = "0.1.0"


def deadline_ns(context: grpc.aio.ServicerContext) -> int | None:
    remaining = context.time_remaining()
    if remaining is None:
        return None
    return time.monotonic_ns() + int(remaining * 1e9)


class MemoryServicer(sgrpc.MemoryServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def Write(self, request: spb.WriteRequest, context: grpc.aio.ServicerContext) -> spb.WriteResponse:
        memories = [mapping.memory_input_from_pb(m, where=f"memories[{i}]") for i, m in enumerate(request.memories)]
        started = time.monotonic_ns()
        results = await self.engine.write(principal(), request.tenant_id, memories, deadline_ns=deadline_ns(context),
                                          idempotency_key=mapping.idempotency_key_from_pb(request))
        reply = mapping.write_response_to_pb(results)
        reply.timings.total_ns = time.monotonic_ns() - started
        return reply

    async def Search(self, request: spb.SearchRequest, context: grpc.aio.ServicerContext) -> spb.SearchResponse:
        queries = [mapping.query_from_pb(q, where=f"queries[{i}]") for i, q in enumerate(request.queries)]
        results = await self.engine.search(principal(), request.tenant_id, queries, deadline_ns=deadline_ns(context))
        return spb.SearchResponse(results=[mapping.query_result_to_pb(r) for r in results])

    async def Get(self, request: spb.GetRequest, context: grpc.aio.ServicerContext) -> spb.GetResponse:
        found, missing = await self.engine.get(principal(), request.tenant_id, list(request.memory_ids))
        return spb.GetResponse(memories=[mapping.memory_to_pb(m) for m in found], missing=missing)

    async def Delete(self, request: spb.DeleteRequest, context: grpc.aio.ServicerContext) -> spb.DeleteResponse:
        deleted, missing = await self.engine.delete(principal(), request.tenant_id, list(request.memory_ids),
                                                    idempotency_key=mapping.idempotency_key_from_pb(request))
        return spb.DeleteResponse(deleted=deleted, missing=missing)

    async def List(self, request: spb.ListRequest, context: grpc.aio.ServicerContext) -> spb.ListResponse:
        page = await self.engine.list_memories(principal(), request.tenant_id,
                                               flt=mapping.filter_from_pb(request.filter),
                                               page_size=request.page_size, page_token=request.page_token)
        return spb.ListResponse(memories=[mapping.memory_to_pb(m) for m in page.memories],
                                next_page_token=page.next_token)

    async def History(self, request: spb.HistoryRequest, context: grpc.aio.ServicerContext) -> spb.HistoryResponse:
        versions, latest = await self.engine.history(principal(), request.tenant_id, request.memory_id)
        return mapping.history_to_pb(versions, latest)

    async def Confirm(self, request: spb.ConfirmRequest, context: grpc.aio.ServicerContext) -> spb.ConfirmResponse:
        confirmed = await self.engine.confirm(principal(), request.tenant_id, list(request.memory_ids),
                                              idempotency_key=mapping.idempotency_key_from_pb(request))
        return mapping.confirm_to_pb(confirmed)

    async def LinkUpdate(self, request: spb.LinkUpdateRequest,
                         context: grpc.aio.ServicerContext) -> spb.LinkUpdateResponse:
        memory, updated = await self.engine.link_update(principal(), request.tenant_id, request.memory_id,
                                                        request.updates_id, unlink=request.unlink)
        return mapping.link_update_to_pb(memory, updated)

    async def Touch(self, request: spb.TouchRequest, context: grpc.aio.ServicerContext) -> spb.TouchResponse:
        touched, missing = await self.engine.touch(principal(), request.tenant_id, list(request.memory_ids))
        return spb.TouchResponse(touched=touched, missing=missing)

    async def Consolidate(self, request: spb.ConsolidateRequest,
                          context: grpc.aio.ServicerContext) -> spb.ConsolidateResponse:
        report = await self.engine.consolidate(principal(), request.tenant_id, dry_run=request.dry_run)
        return mapping.consolidate_to_pb(report)

    async def Extract(self, request: spb.ExtractRequest, context: grpc.aio.ServicerContext) -> spb.ExtractResponse:
        done = await self.engine.extract(principal(), request.tenant_id, conversation=request.conversation,
                                         turns=request.turns)
        return mapping.extraction_to_pb(done)

    async def GetSettings(self, request: spb.GetSettingsRequest,
                          context: grpc.aio.ServicerContext) -> spb.SettingsResponse:
        own, effective = await self.engine.settings(principal(), request.tenant_id)
        return mapping.settings_to_pb(request.tenant_id, own, effective)

    async def UpdateSettings(self, request: spb.UpdateSettingsRequest,
                             context: grpc.aio.ServicerContext) -> spb.SettingsResponse:
        own, effective = await self.engine.update_settings(
            principal(), request.tenant_id, values=mapping.settings_values_from_pb(request.settings),
            reset=list(request.reset))
        return mapping.settings_to_pb(request.tenant_id, own, effective)

    async def Forget(self, request: spb.ForgetRequest, context: grpc.aio.ServicerContext) -> spb.ForgetResponse:
        count, ids = await self.engine.forget(principal(), request.tenant_id, mapping.forget_from_pb(request),
                                              idempotency_key=mapping.idempotency_key_from_pb(request))
        return spb.ForgetResponse(count=count, memory_ids=ids)

    async def Audit(self, request: spb.AuditRequest, context: grpc.aio.ServicerContext) -> spb.AuditResponse:
        entries, token = await self.engine.audit(principal(), request.tenant_id, page_size=request.page_size,
                                                 page_token=request.page_token,
                                                 ops=mapping.audit_ops_from_pb(request.ops), memory_id=request.memory_id)
        return spb.AuditResponse(entries=[mapping.audit_entry_to_pb(e) for e in entries], next_page_token=token)

    async def Info(self, request: spb.InfoRequest, context: grpc.aio.ServicerContext) -> spb.InfoResponse:
        principal()
        return mapping.info_to_pb(self.engine.info(), version=VERSION)


class AdminServicer(sgrpc.AdminServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def CreateTenant(self, request: spb.CreateTenantRequest,
                           context: grpc.aio.ServicerContext) -> spb.CreateTenantResponse:
        initial = [mapping.memory_input_from_pb(m, where=f"initial_memories[{i}]")
                   for i, m in enumerate(request.initial_memories)]
        count = await self.engine.create_tenant(principal(), request.tenant_id, initial,
                                                template_tenant_id=request.template_tenant_id)
        return spb.CreateTenantResponse(tenant_id=request.tenant_id, initial_memories=count)

    async def ListTenants(self, request: spb.ListTenantsRequest,
                          context: grpc.aio.ServicerContext) -> spb.ListTenantsResponse:
        return spb.ListTenantsResponse(tenant_ids=self.engine.list_tenants(principal()))

    async def CreateKey(self, request: spb.CreateKeyRequest, context: grpc.aio.ServicerContext) -> spb.CreateKeyResponse:
        key_id, secret = self.engine.create_key(principal(), name=request.name, tenant_ids=list(request.tenant_ids),
                                                prefixes=list(request.tenant_prefixes), admin=request.admin)
        return spb.CreateKeyResponse(key_id=key_id, secret=secret)

    async def DeleteTenant(self, request: spb.DeleteTenantRequest,
                           context: grpc.aio.ServicerContext) -> spb.DeleteTenantResponse:
        return spb.DeleteTenantResponse(deleted_memories=await self.engine.delete_tenant(principal(), request.tenant_id))

    async def RevokeKey(self, request: spb.RevokeKeyRequest, context: grpc.aio.ServicerContext) -> spb.RevokeKeyResponse:
        self.engine.revoke_key(principal(), request.key_id)
        return spb.RevokeKeyResponse(key_id=request.key_id)

    async def RotateKey(self, request: spb.RotateKeyRequest, context: grpc.aio.ServicerContext) -> spb.RotateKeyResponse:
        return spb.RotateKeyResponse(key_id=request.key_id, secret=self.engine.rotate_key(principal(), request.key_id))

    async def Stats(self, request: spb.StatsRequest, context: grpc.aio.ServicerContext) -> spb.StatsResponse:
        return mapping.stats_to_pb(self.engine.stats(principal(), request.tenant_id))
