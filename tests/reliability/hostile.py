"""Shared by the hostile-input table and the fuzz test: a server with small limits, raw calls by method
name (so any bytes can be sent), and a snapshot of everything the server stores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support import ADMIN_KEY, RunningServer, start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

LIMITS = {"max_memories_per_write": 8, "max_content_bytes": 1024, "max_queries_per_search": 4,
          "max_top_k": 50, "max_candidates": 100, "max_page_size": 20, "max_query_bytes": 256,
          "max_entities": 4, "max_metadata_entries": 4}
SERVICES = ("MemoryService", "AdminService")
TENANTS = ("acme", "acme2", "acme/alice")


def all_rpcs() -> list[str]:
    """Every RPC of the engram services, as 'Service/Method'."""
    return [f"{name}/{m.name}" for name in SERVICES for m in spb.DESCRIPTOR.services_by_name[name].methods]


def start_hostile_server(data_dir: Path, *, embedder: Any, **overrides: Any) -> RunningServer:
    running = start_server(data_dir, embedder=embedder, limits=dict(LIMITS), **overrides)
    admin = running.client()
    for tenant in TENANTS:
        admin.create_tenant(tenant)
    admin.write("acme", "User prefers tea over coffee", "The deploy window is Tuesday morning",
                pb.MemoryInput(content="budget is 10k", key="budget", scope="2026"))
    return running


def call(channel: grpc.Channel, rpc: str, request: bytes | Any, *, metadata: Sequence[tuple[str, str]] = (),
         timeout: float | None = 30.0) -> tuple[grpc.StatusCode, bytes]:
    """Sends ``request`` (a message or raw bytes) to ``/engram.v1.<rpc>``; returns (status, reply bytes)."""
    payload = request if isinstance(request, bytes) else request.SerializeToString()
    method = channel.unary_unary(f"/engram.v1.{rpc}")
    try:
        return grpc.StatusCode.OK, method(payload, metadata=list(metadata), timeout=timeout)
    except grpc.RpcError as exc:
        return exc.code(), b""


def admin_metadata(key: str = ADMIN_KEY) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {key}")]


@dataclass(frozen=True)
class Snapshot:
    tenants: tuple[str, ...]
    memories: tuple[tuple[str, bytes], ...]   # (tenant, serialized memory) for every memory of every tenant
    settings: tuple[bytes, ...] = ()          # every tenant's GetSettings reply


def snapshot(channel: grpc.Channel) -> Snapshot:
    md = admin_metadata()
    code, raw = call(channel, "AdminService/ListTenants", spb.ListTenantsRequest(), metadata=md)
    assert code == grpc.StatusCode.OK, code
    tenants = tuple(spb.ListTenantsResponse.FromString(raw).tenant_ids)
    memories: list[tuple[str, bytes]] = []
    settings: list[bytes] = []
    for tenant in tenants:
        code, raw = call(channel, "MemoryService/GetSettings", spb.GetSettingsRequest(tenant_id=tenant), metadata=md)
        assert code == grpc.StatusCode.OK, code
        settings.append(raw)
        token = ""
        while True:
            code, raw = call(channel, "MemoryService/List",
                             spb.ListRequest(tenant_id=tenant, page_size=LIMITS["max_page_size"], page_token=token),
                             metadata=md)
            assert code == grpc.StatusCode.OK, code
            reply = spb.ListResponse.FromString(raw)
            memories.extend((tenant, m.SerializeToString(deterministic=True)) for m in reply.memories)
            token = reply.next_page_token
            if not token:
                break
    return Snapshot(tenants=tenants, memories=tuple(memories), settings=tuple(settings))


def assert_serving(channel: grpc.Channel) -> None:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    code, _ = call(channel, "MemoryService/Info", spb.InfoRequest(), metadata=admin_metadata(), timeout=10)
    assert code == grpc.StatusCode.OK, code
