"""OpenTelemetry tracing: a SERVER span per RPC and, under it, one span per pipeline stage, exported over
OTLP/HTTP. Off by default (``tracing = false``); when off nothing here is built and the SDK is never imported —
the hot paths check ``tracing is None`` and nothing more.

Configured by the SDK's standard environment variables: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_ENDPOINT`` (default http://localhost:4318), ``OTEL_SERVICE_NAME`` (default "engram"),
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` (default: parent-based,
always on) and ``OTEL_BSP_*`` for the batch span processor.

The stages take their times from the clocks the pipeline already reads for the per-stage timings of each reply
(``Timings.lap``): a stage is timed once, and its span is made afterwards with those start and end times. A
search batch serves many requests: each request gets its own copy of the batch's stage spans, with
``engram.batch.size`` saying how many queries shared them (docs/operations/tracing.md).

Attributes never carry memory content, query text, keys or tenant ids: counts, sizes, depths and status codes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, TypeVar

log = logging.getLogger(__name__)

TRACE_HEADERS = ("traceparent", "tracestate")   # W3C trace context: what is read from and passed on in metadata
DEFAULT_SERVICE_NAME = "engram"
SCOPE = "engram.server"
# A stage as the pipeline records it: (name, start, end) on time.monotonic_ns().
Mark = tuple[str, int, int]
T = TypeVar("T")


class Tracing:
    """The tracer provider (one per process, owned by the composition root) and the spans engram makes."""

    def __init__(self, *, exporter: Any = None) -> None:
        """``exporter``: a span exporter (default: OTLP/HTTP from the environment)."""
        from opentelemetry import context, trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        resource = Resource.create()
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
        self.provider = TracerProvider(resource=resource)   # the sampler: OTEL_TRACES_SAMPLER (parent-based on)
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer(SCOPE)
        self._trace = trace
        self._context = context
        self._propagator = TraceContextTextMapPropagator()
        self._status, self._status_code = trace.Status, trace.StatusCode
        self._server_kind = trace.SpanKind.SERVER
        self._internal_kind = trace.SpanKind.INTERNAL
        log.info("tracing on: OTLP/HTTP export, service %s", resource.attributes.get(SERVICE_NAME))

    # -- context ----------------------------------------------------------------------------------------
    def extract(self, carrier: Mapping[str, str]) -> Any:
        """The context a W3C ``traceparent`` / ``tracestate`` pair names (an empty one: a new trace)."""
        return self._propagator.extract(carrier)

    def inject(self, parent: Any = None) -> dict[str, str]:
        """``traceparent`` (and ``tracestate``) of ``parent`` (default: the current context), to pass on."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=parent)
        return carrier

    def current(self) -> Any:
        """The current context, to hand to work that runs on another thread (executors do not copy it)."""
        return self._context.get_current()

    def recording(self) -> bool:
        """Whether the current span is sampled: stage spans are made for it."""
        return bool(self._trace.get_current_span().is_recording())

    @contextmanager
    def server_span(self, name: str, *, carrier: Mapping[str, str], attributes: Mapping[str, Any]) -> Iterator[Any]:
        """A SERVER span, current inside, whose parent is the caller's ``traceparent`` (if any)."""
        with self.tracer.start_as_current_span(name, context=self.extract(carrier), kind=self._server_kind,
                                               attributes=attributes, record_exception=False,
                                               set_status_on_exception=False) as span:
            yield span

    @contextmanager
    def span(self, name: str, *, parent: Any = None, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """An INTERNAL span, current inside; ``parent`` a context from :meth:`current` (default: the current
        one)."""
        token = self._context.attach(parent) if parent is not None else None
        try:
            with self.tracer.start_as_current_span(name, kind=self._internal_kind, attributes=attributes) as span:
                yield span
        finally:
            if token is not None:
                self._context.detach(token)

    # -- stages -----------------------------------------------------------------------------------------
    def stages(self, marks: Sequence[Mark], *, parent: Any = None, attributes: Mapping[str, Any] | None = None,
               per_stage: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """One finished span per mark, ``engram.<stage>``, under ``parent`` (default: the current span),
        with the mark's own start and end times; ``attributes`` on each, ``per_stage[stage]`` on its own."""
        offset_ns = time.time_ns() - time.monotonic_ns()   # monotonic stamps → epoch time
        for stage, start_ns, end_ns in marks:
            own = per_stage.get(stage) if per_stage else None
            self._finished(f"engram.{stage}", parent, start_ns + offset_ns, max(start_ns, end_ns) + offset_ns,
                           attributes={**(attributes or {}), **own} if own else attributes)

    def served(self, name: str, carriers: Sequence[Mapping[str, str]], *, start_ns: int, end_ns: int,
               attributes: Mapping[str, Any]) -> None:
        """The receiving side of a batched Ray hop (the Encoder / Reranker deployments): one finished SERVER span
        ``name`` under each carrier's context (each traced request the pass served), with the pass's start and
        end (``time.monotonic_ns()``) and ``attributes``."""
        offset_ns = time.time_ns() - time.monotonic_ns()
        service, _, method = name.partition("/")
        attributes = {"rpc.system": "ray", "rpc.service": service, "rpc.method": method, **attributes}
        for carrier in carriers:
            self._finished(name, self.extract(carrier), start_ns + offset_ns, max(start_ns, end_ns) + offset_ns,
                           attributes=attributes, kind=self._server_kind)

    def _finished(self, name: str, parent: Any, start_ns: int, end_ns: int, *,
                  attributes: Mapping[str, Any] | None, kind: Any = None) -> None:
        span = self.tracer.start_span(name, context=parent, kind=kind or self._internal_kind, start_time=start_ns,
                                      attributes=attributes)
        span.end(end_time=end_ns)

    def error_status(self) -> Any:
        return self._status(self._status_code.ERROR)

    def flush(self, timeout_ms: int = 5000) -> bool:
        return bool(self.provider.force_flush(timeout_ms))

    def close(self) -> None:
        """Exports what is buffered and stops the exporter (server shutdown)."""
        self.provider.shutdown()


def hop_carrier(tracing: Tracing | None) -> dict[str, str]:
    """What a Ray hop passes on (``engram serve --ray``: edge → shard replica): the current context's
    ``traceparent`` / ``tracestate``; empty when tracing is off."""
    return tracing.inject() if tracing is not None else {}


def hop_span(tracing: Tracing | None, name: str, carrier: Mapping[str, str] | None) -> AbstractContextManager[Any]:
    """The receiving side of a Ray hop: a SERVER span ``name`` under the caller's context, current inside;
    nothing when tracing is off here."""
    if tracing is None:
        return nullcontext()
    service, _, method = name.partition("/")
    return tracing.server_span(name, carrier=carrier or {},
                               attributes={"rpc.system": "ray", "rpc.service": service, "rpc.method": method})


# The trace contexts of the traced requests a forward pass serves, set around the pass on its executor thread
# (:func:`carrying`) and read by the Ray stand-ins of the models (server/cluster/remote_models.py), which pass
# them on to the Encoder / Reranker deployments. Empty when tracing is off or no request of the batch is traced.
_HOP_TRACES: ContextVar[tuple[Mapping[str, str], ...]] = ContextVar("engram_hop_traces", default=())


def carrying(traces: Sequence[Mapping[str, str]], fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` with ``traces`` as what a Ray hop made inside it passes on; for an executor thread (which
    does not inherit the caller's context). With no traces it is ``fn(*args)``."""
    if not traces:
        return fn(*args)
    token = _HOP_TRACES.set(tuple(traces))
    try:
        return fn(*args)
    finally:
        _HOP_TRACES.reset(token)


def hop_traces() -> list[dict[str, str]]:
    """The trace contexts set by :func:`carrying` on this thread (a list of W3C carriers; empty: none)."""
    return [dict(c) for c in _HOP_TRACES.get()]


def build_tracing(enabled: bool) -> Tracing | None:
    """The process's tracing when ``tracing`` is on (the SDK is imported only then), else None."""
    if not enabled:
        return None
    try:
        return Tracing()
    except ImportError as exc:
        from server.errors import ConfigError

        raise ConfigError("tracing = true needs the OpenTelemetry SDK: pip install 'engram-server[tracing]' "
                          f"(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http): {exc}") from exc


def traced_now(tracing: Tracing | None) -> bool:
    """A cheap check for the hot path: tracing on and the current span sampled."""
    return tracing is not None and tracing.recording()
