"""Calls of the memory-lifecycle RPCs for the integration tests (the shared Client covers the basic ones)."""

from __future__ import annotations

import time
from typing import Any

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS


def now_ms() -> int:
    return int(time.time() * 1000)


def mem(content: str, **fields: Any) -> pb.MemoryInput:
    return pb.MemoryInput(content=content, **fields)


def write_one(client: Any, tenant: str, content: str, **fields: Any) -> spb.WriteResult:
    return client.write(tenant, mem(content, **fields)).results[0]


def get_one(client: Any, tenant: str, memory_id: str) -> pb.Memory:
    reply = client.get(tenant, memory_id)
    assert not reply.missing, reply.missing
    return reply.memories[0]


def history(client: Any, tenant: str, memory_id: str) -> spb.HistoryResponse:
    return client.memory.History(spb.HistoryRequest(tenant_id=tenant, memory_id=memory_id), metadata=client.metadata)


def confirm(client: Any, tenant: str, *ids: str) -> spb.ConfirmResponse:
    return client.memory.Confirm(spb.ConfirmRequest(tenant_id=tenant, memory_ids=list(ids)), metadata=client.metadata)


def forget(client: Any, tenant: str, **fields: Any) -> spb.ForgetResponse:
    return client.memory.Forget(spb.ForgetRequest(tenant_id=tenant, **fields), metadata=client.metadata)


def audit(client: Any, tenant: str, **fields: Any) -> list[spb.AuditEntry]:
    out: list[spb.AuditEntry] = []
    token = ""
    while True:
        reply = client.memory.Audit(spb.AuditRequest(tenant_id=tenant, page_token=token, **fields),
                                    metadata=client.metadata)
        out.extend(reply.entries)
        token = reply.next_page_token
        if not token:
            return out


def delete_tenant(client: Any, tenant: str) -> spb.DeleteTenantResponse:
    return client.admin.DeleteTenant(spb.DeleteTenantRequest(tenant_id=tenant), metadata=client.metadata)


def ids_of(result: pb.QueryResult) -> list[str]:
    return [h.memory.memory_id for h in result.hits]
