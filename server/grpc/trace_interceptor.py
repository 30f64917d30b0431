"""The SERVER span of each RPC (server/tracing.py), outermost of the interceptors so it covers the whole call.

Its parent is the caller's W3C ``traceparent`` / ``tracestate`` metadata. Named ``engram.v1.MemoryService/Search``
and attributed after the OpenTelemetry RPC conventions: ``rpc.system`` grpc, ``rpc.service``, ``rpc.method``,
``rpc.grpc.status_code`` (the numeric status the call ended with). Nothing from the request or its metadata
besides the trace context is recorded.
"""

from __future__ import annotations

from typing import Any

import grpc

from server.grpc.interceptors import PerMethodInterceptor
from server.tracing import TRACE_HEADERS, Tracing

# The status codes that mark a SERVER span as an error (the RPC conventions: the server's fault, not the caller's).
SERVER_ERRORS = frozenset(c.value[0] for c in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED,
                                               grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL,
                                               grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DATA_LOSS))


def rpc_attributes(method: str) -> dict[str, str]:
    """``/engram.v1.MemoryService/Search`` → the RPC conventions' service and method attributes."""
    service, _, name = method.lstrip("/").partition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}


def trace_carrier(metadata: Any) -> dict[str, str]:
    """The W3C trace context headers of a call's metadata (gRPC keys are lower case)."""
    return {k: v for k, v in (metadata or ()) if k in TRACE_HEADERS and isinstance(v, str)}


def status_number(context: grpc.aio.ServicerContext, failed: bool) -> int:
    """The status code the call ended with: what the handler set (``abort`` sets it), else OK or UNKNOWN."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return int(code.value[0])
    if isinstance(code, int):
        return code
    return grpc.StatusCode.UNKNOWN.value[0] if failed else grpc.StatusCode.OK.value[0]


class TracingInterceptor(PerMethodInterceptor):
    def __init__(self, tracing: Tracing) -> None:
        super().__init__()
        self._tracing = tracing

    def _wrap(self, method: str, handler: Any) -> Any:
        inner = handler.unary_unary
        tracing = self._tracing
        name = method.lstrip("/")
        attributes = rpc_attributes(method)

        async def traced(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with tracing.server_span(name, carrier=trace_carrier(context.invocation_metadata()),
                                     attributes=attributes) as span:
                failed = True
                try:
                    reply = await inner(request, context)
                    failed = False
                    return reply
                finally:
                    code = status_number(context, failed)
                    span.set_attribute("rpc.grpc.status_code", code)
                    if code in SERVER_ERRORS:
                        span.set_status(tracing.error_status())

        return grpc.unary_unary_rpc_method_handler(traced, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
