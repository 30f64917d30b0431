"""A real OTLP/HTTP trace receiver for tests: ``POST /v1/traces`` with an ``ExportTraceServiceRequest``
protobuf (what the OpenTelemetry SDK's OTLP/HTTP exporter sends), parsed with the ``opentelemetry-proto``
messages and kept as flat :class:`ReceivedSpan` rows. Neither the OpenTelemetry Collector nor Jaeger installs
from PyPI, npm or Debian's apt, so the endpoint is built here from the protocol's own messages."""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

KINDS = {Span.SPAN_KIND_INTERNAL: "INTERNAL", Span.SPAN_KIND_SERVER: "SERVER", Span.SPAN_KIND_CLIENT: "CLIENT",
         Span.SPAN_KIND_PRODUCER: "PRODUCER", Span.SPAN_KIND_CONSUMER: "CONSUMER"}


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


def parse_export(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest.FromString(body)
    out = []
    for rs in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(ReceivedSpan(
                    name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                    parent_span_id=s.parent_span_id.hex(), kind=KINDS.get(s.kind, str(s.kind)),
                    start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                    attributes={kv.key: _value(kv.value) for kv in s.attributes}, resource=resource,
                    status_code=s.status.code))
    return out


class OtlpReceiver:
    """Serves on 127.0.0.1:<free port> from a thread; ``endpoint`` is the traces URL to export to."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:   # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_error(404 if self.path != "/v1/traces" else 415)
                    return
                spans = parse_export(body)
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 10.0) -> list[ReceivedSpan]:
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.received()
            if found(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.02)

    def clear(self) -> None:
        with self._lock:
            self.spans.clear()
            self.requests = 0

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def tree(spans: list[ReceivedSpan], root: ReceivedSpan) -> list[str]:
    """The span tree under ``root`` as indented lines: duration, and start after the root's start."""
    children: dict[str, list[ReceivedSpan]] = {}
    for s in spans:
        children.setdefault(s.parent_span_id, []).append(s)
    lines: list[str] = []

    def walk(span: ReceivedSpan, depth: int) -> None:
        at_ms = (span.start_ns - root.start_ns) / 1e6
        lines.append(f"{'  ' * depth}- {span.name} ({span.kind.lower()}) {span.duration_ms:.2f} ms, at +{at_ms:.2f} ms")
        for child in sorted(children.get(span.span_id, []), key=lambda s: (s.start_ns, s.name)):
            walk(child, depth + 1)

    walk(root, 0)
    return lines
