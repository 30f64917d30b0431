"""Touch: the client's explicit "used" signal, through the real gRPC server."""

from __future__ import annotations

import grpc
from memory_support import audit, get_one, now_ms, write_one
from support import status_of

from engram_proto.v1 import service_pb2 as spb


def _touch(client, tenant: str, *ids: str) -> spb.TouchResponse:  # type: ignore[no-untyped-def]
    return client.memory.Touch(spb.TouchRequest(tenant_id=tenant, memory_ids=list(ids)), metadata=client.metadata)


def test_touch_records_one_access_per_known_id_and_reports_the_missing(server, admin) -> None:
    admin.create_tenant("acme/t")
    old = now_ms() - 10 * 86_400_000
    mid = write_one(admin, "acme/t", "Alice's laptop is a ThinkPad X1", created_at_ms=old).memory_id
    before = get_one(admin, "acme/t", mid)
    assert before.access_count == 0 and before.last_access_at_ms == old
    reply = _touch(admin, "acme/t", mid, mid, "nosuchmemory")
    assert reply.touched == 1 and list(reply.missing) == ["nosuchmemory"]
    after = get_one(admin, "acme/t", mid)
    assert after.access_count == 1 and after.last_access_at_ms >= now_ms() - 60_000
    assert after.importance == before.importance        # a use refreshes recency; importance is the writer's
    uses = audit(admin, "acme/t", ops=[spb.AUDIT_OP_USE])
    assert [r.memory_id for e in uses for r in e.refs] == [mid]


def test_touch_checks_its_input_and_the_key_scope(server, admin) -> None:
    admin.create_tenant("acme/t2")
    admin.create_tenant("beta/x")
    mid = write_one(admin, "beta/x", "beta's private note").memory_id
    scoped = server.client(admin.create_key(tenant_ids=["acme/t2"]))
    assert status_of(lambda: _touch(scoped, "beta/x", mid)) == grpc.StatusCode.PERMISSION_DENIED
    assert status_of(lambda: _touch(admin, "acme/t2")) == grpc.StatusCode.INVALID_ARGUMENT
    assert status_of(lambda: _touch(admin, "nosuch/tenant", mid)) == grpc.StatusCode.NOT_FOUND
    assert get_one(admin, "beta/x", mid).access_count == 0
