"""``python -m server.grpc.healthcheck [HOST:PORT]``: exit 0 when the server's gRPC health says SERVING.

The container's HEALTHCHECK runs this; it uses the standard ``grpc.health.v1`` service, so any gRPC
health prober (grpc_health_probe, Kubernetes gRPC probes) sees the same answer.
"""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def check(address: str, *, service: str = "", timeout_s: float = 3.0) -> str:
    """The serving status name (SERVING, NOT_SERVING, ...) or the gRPC error code name."""
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service),
                                                              timeout=timeout_s)
        except grpc.RpcError as exc:
            return str(exc.code().name)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    status = check(args[0] if args else "127.0.0.1:50051")
    sys.stdout.write(status + "\n")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    raise SystemExit(main())
