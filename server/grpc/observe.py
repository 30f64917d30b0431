"""Feeds ``server/metrics.py`` from the edge: RPC starts, and per-stage timings read off Search replies.

Sits outside the edge interceptor, so every call counts as started (even one that fails auth); status
codes and latency come from the edge interceptor's ``on_done`` hook, which knows the final code.
"""

from __future__ import annotations

from typing import Any

import grpc

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.grpc.interceptors import PerMethodInterceptor
from server.metrics import STAGES, Metrics


def stages_ns(timings: pb.Timings) -> dict[str, int]:
    return {stage: int(getattr(timings, f"{stage}_ns")) for stage in STAGES}


class ObserveInterceptor(PerMethodInterceptor):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self._metrics = metrics

    def _wrap(self, method: str, handler: Any) -> Any:
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
