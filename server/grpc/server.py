"""Builds the grpc.aio server: servicers, the edge interceptor, health checking and reflection."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from server.engine.engine import Engine
from server.errors import ConfigError
from engram_proto.v1 import service_pb2, service_pb2_grpc
from server.grpc.interceptors import EdgeInterceptor
from server.grpc.observe import ObserveInterceptor
from server.grpc.servicer import AdminServicer, MemoryServicer
from server.grpc.trace_interceptor import TracingInterceptor
from server.metrics import Metrics

SERVICE_NAMES = ("engram.v1.MemoryService", "engram.v1.AdminService")
# Health of writes: NOT_SERVING while the data dir is below its free-space watermark (writes are refused with
# RESOURCE_EXHAUSTED "storage full"; reads go on, so the services above stay SERVING).
STORAGE_HEALTH = "engram.v1.Storage"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

log = logging.getLogger(__name__)


class GrpcFrontend:
    def __init__(self, engine: Engine, *, listen: str, tls_cert: str = "", tls_key: str = "",
                 tls_client_ca: str = "", metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.health = health.aio.HealthServicer() if hasattr(health, "aio") else health.HealthServicer()
        tracing = getattr(engine, "tracing", None)   # server/tracing.py; None: off
        self.server = grpc.aio.server(
            interceptors=[*([TracingInterceptor(tracing)] if tracing is not None else []),
                          *([ObserveInterceptor(metrics)] if metrics is not None else []),
                          EdgeInterceptor(authenticate=engine.registry.catalog.authenticate,
                                          on_done=metrics.rpc_done if metrics is not None else None)],
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                     ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])
        service_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(engine), self.server)
        service_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(engine), self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = [service_pb2.DESCRIPTOR.services_by_name[n.split(".")[-1]].full_name for n in SERVICE_NAMES]
        reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], self.server)
        credentials = server_credentials(cert=tls_cert, key=tls_key, client_ca=tls_client_ca)
        if credentials is None:
            self.port = self.server.add_insecure_port(listen)
        else:
            self.port = self.server.add_secure_port(listen, credentials)
        if self.port == 0:
            raise OSError(f"cannot listen on {listen}")

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *SERVICE_NAMES):
            await _maybe_await(self.health.set(name, status))
        if serving and self.engine.space is not None:
            await self.set_storage_ok(not self.engine.space.report().low)
        elif not serving:
            await self.set_storage_ok(False)

    async def set_storage_ok(self, ok: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
        await _maybe_await(self.health.set(STORAGE_HEALTH, status))

    async def start(self) -> None:
        await self.set_serving(False)
        await self.server.start()

    async def stop(self, grace_s: float) -> None:
        await self.set_serving(False)
        await self.server.stop(grace_s)


def server_credentials(*, cert: str, key: str, client_ca: str) -> grpc.ServerCredentials | None:
    """TLS from PEM files when ``cert`` is set; mutual TLS (client certificates required) when ``client_ca`` is."""
    if not cert:
        return None
    try:
        chain = Path(cert).read_bytes()
        private_key = Path(key).read_bytes()
        roots = Path(client_ca).read_bytes() if client_ca else None
    except OSError as exc:
        raise ConfigError(f"cannot read TLS files: {exc}") from exc
    log.info("TLS on%s", " with client certificates required" if roots else "")
    return grpc.ssl_server_credentials([(private_key, chain)], root_certificates=roots,
                                       require_client_auth=roots is not None)


async def _maybe_await(value: object) -> None:
    if hasattr(value, "__await__"):
        await value  # type: ignore[misc]
