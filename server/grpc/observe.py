"""Feeds ``server/metrics.py`` from the edge: RPC starts, and per-stage timings read off Search replies.

Sits outside the edge interceptor, so every call counts as started (even one that fails auth); status
codes and latency come from the edge interceptor's ``on_done`` hook, which knows the final code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from server.grpc.gen.engram.v1 import messages_pb2 as pb
from server.grpc.gen.engram.v1 import service_pb2 as spb
from server.grpc.interceptors import OPEN_PREFIXES
from server.metrics import STAGES, Metrics


def stages_ns(timings: pb.Timings) -> dict[str, int]:
    return {stage: int(getattr(timings, f"{stage}_ns")) for stage in STAGES}


class ObserveInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._handlers: dict[str, Any] = {}

    async def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
        method = details.method
        cached = self._handlers.get(method)
        if cached is not None:
            return cached
        handler = await continuation(details)
        if handler is None:
            return None
        if handler.unary_unary is not None and not method.startswith(OPEN_PREFIXES):
            handler = self._observe(method, handler)
        self._handlers[method] = handler  # one per method, as in EdgeInterceptor
        return handler

    def _observe(self, method: str, handler: Any) -> Any:
        inner = handler.unary_unary
        metrics = self._metrics

        async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            metrics.rpc_started(method)
            reply = await inner(request, context)
            if isinstance(reply, spb.SearchResponse):
                for result in reply.results:
                    metrics.query_done(stages_ns(result.timings), batch_size=result.timings.batch_size)
            return reply

        return grpc.unary_unary_rpc_method_handler(observed, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
