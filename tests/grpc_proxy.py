"""A tiny in-process gRPC proxy in front of a real server, for tests of what a client does when an answer is
lost: it forwards every unary call's request bytes to the server as they are (key, metadata and deadline
included) and hands back the server's answer — or, for the next ``drop[method]`` calls of a method, throws
the answer away after the server applied the call and answers UNAVAILABLE (a replica that died between
its commit and its reply), or sits on it past the client's deadline (``stall[method]``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

_FORWARDED = ("authorization", "x-request-id")


class LossyProxy:
    def __init__(self, upstream: str) -> None:
        self.channel = grpc.insecure_channel(upstream)
        self.drop: Counter[str] = Counter()     # method name → answers still to lose (UNAVAILABLE)
        self.stall: Counter[str] = Counter()    # method name → answers still to hold past the deadline
        self.seen: list[tuple[str, bytes]] = []  # (method name, request bytes) of every call, in order
        self.applied: Counter[str] = Counter()  # method name → calls the server answered OK
        self._lock = threading.Lock()
        self.server = grpc.server(ThreadPoolExecutor(8, thread_name_prefix="proxy"))
        self.server.add_generic_rpc_handlers([_Handler(self)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self, method: str, message_type: Any) -> list[Any]:
        """Every request of ``method`` the proxy saw, parsed."""
        return [message_type.FromString(body) for name, body in self.seen if name == method]

    def forward(self, path: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        method = path.rsplit("/", 1)[-1]
        with self._lock:
            self.seen.append((method, request))
        metadata = [(k, v) for k, v in context.invocation_metadata() if k in _FORWARDED]
        try:
            reply = self.channel.unary_unary(path)(request, timeout=context.time_remaining(), metadata=metadata)
        except grpc.RpcError as exc:
            context.abort(exc.code(), exc.details())
        with self._lock:
            self.applied[method] += 1
            dropped = self.drop[method] > 0
            stalled = not dropped and self.stall[method] > 0
            if dropped:
                self.drop[method] -= 1
            if stalled:
                self.stall[method] -= 1
        if dropped:
            context.abort(grpc.StatusCode.UNAVAILABLE, "proxy: the answer was lost on the way back")
        if stalled:
            remaining = context.time_remaining()
            time.sleep((remaining or 0.0) + 0.2)   # the client's deadline passes first
        return reply  # type: ignore[no-any-return]

    def close(self) -> None:
        self.server.stop(0).wait(5)
        self.channel.close()


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, proxy: LossyProxy) -> None:
        self.proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        path = handler_call_details.method
        # no (de)serializers: the request and the answer pass through as bytes
        return grpc.unary_unary_rpc_method_handler(lambda request, context: self.proxy.forward(path, request, context))
