"""server/tracing.py and its seams, without a server: off imports nothing; stage spans keep the marks' own
times; the SDK client passes the caller's trace context on only when the application uses OpenTelemetry; the
Ray hop (edge → shard replica) carries the trace; the RPC attributes follow the OpenTelemetry conventions."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engram_client import _core
from server.domain import Timings
from server.grpc.trace_interceptor import SERVER_ERRORS, rpc_attributes, status_number, trace_carrier
from server.tracing import Tracing, build_tracing, carrying, hop_carrier, hop_span, hop_traces

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tracing() -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    t = Tracing(exporter=exporter)
    yield t, exporter
    t.close()


def finished(t: Tracing, exporter: InMemorySpanExporter) -> dict[str, Any]:
    """The finished spans by name, each checked to encode as OTLP (what the exporter sends)."""
    assert t.flush()
    spans = exporter.get_finished_spans()
    encode_spans(spans).SerializeToString()
    return {s.name: s for s in spans}


def test_off_builds_nothing_and_imports_no_opentelemetry() -> None:
    code = ("import sys, server.app, server.grpc.server, server.engine.engine, engram_client; "
            "from server.tracing import build_tracing; assert build_tracing(False) is None; "
            "from engram_client import _core; assert [k for k, _ in _core.call_metadata('k')] == "
            "['x-request-id', 'authorization']; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_timings_lap_records_marks_only_when_traced() -> None:
    off, on = Timings(), Timings(marks=[])
    t0 = time.monotonic_ns()
    assert off.lap("ann", t0) >= 0 and off.marks is None
    ns = on.lap("ann", t0)
    (stage, start, end), = on.marks
    assert (stage, start, end - start) == ("ann", t0, ns)


def test_stage_spans_keep_the_marks_times_under_the_current_span(tracing: tuple[Tracing, InMemorySpanExporter]) -> None:
    t, exporter = tracing
    base = time.monotonic_ns()
    marks = [("queue", base, base + 1_000), ("embed", base + 1_000, base + 5_000), ("bm25", base + 900, base + 3_000)]
    with t.span("parent") as parent:
        t.stages(marks, attributes={"engram.batch.size": 3}, per_stage={"embed": {"engram.extra": 1}})
    spans = finished(t, exporter)
    for name, start, end in marks:
        span = spans[f"engram.{name}"]
        assert span.end_time - span.start_time == end - start
        assert span.parent.span_id == parent.get_span_context().span_id
        assert span.attributes["engram.batch.size"] == 3
    assert spans["engram.bm25"].start_time - spans["engram.queue"].start_time == 900
    assert spans["engram.embed"].attributes["engram.extra"] == 1
    assert "engram.extra" not in spans["engram.bm25"].attributes


def test_a_server_span_joins_the_callers_traceparent(tracing: tuple[Tracing, InMemorySpanExporter]) -> None:
    t, exporter = tracing
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with t.server_span("engram.v1.MemoryService/Search", carrier={"traceparent": parent, "tracestate": "k=v"},
                       attributes=rpc_attributes("/engram.v1.MemoryService/Search")) as span:
        assert t.recording()
    s = finished(t, exporter)["engram.v1.MemoryService/Search"]
    assert f"{s.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{s.parent.span_id:016x}" == "b7ad6b7169203331" and s.parent.is_remote
    assert s.kind.name == "SERVER" and s.context.trace_state.get("k") == "v"
    assert span.get_span_context().trace_id == s.context.trace_id


def test_the_sampler_and_service_name_come_from_the_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
    exporter = InMemorySpanExporter()
    t = Tracing(exporter=exporter)
    try:
        assert t.provider.resource.attributes["service.name"] == "engram"
        assert t.provider.resource.attributes["deployment.environment"] == "test"
        with t.span("never"):
            assert not t.recording()
        assert t.flush() and exporter.get_finished_spans() == ()
    finally:
        t.close()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memory-prod")
    named = Tracing(exporter=InMemorySpanExporter())
    assert named.provider.resource.attributes["service.name"] == "memory-prod"
    named.close()


def test_rpc_attributes_and_status_codes() -> None:
    assert rpc_attributes("/engram.v1.AdminService/CreateTenant") == {
        "rpc.system": "grpc", "rpc.service": "engram.v1.AdminService", "rpc.method": "CreateTenant"}
    metadata = (("authorization", "Bearer egk_x_y"), ("traceparent", "00-a-b-01"), ("tracestate", "k=v"),
                ("x-request-id", "r"), ("traceparent-bin", b"\x00"))
    assert trace_carrier(metadata) == {"traceparent": "00-a-b-01", "tracestate": "k=v"}

    class Context:
        def __init__(self, code: object) -> None:
            self._code = code

        def code(self) -> object:
            return self._code

    assert status_number(Context(None), failed=False) == 0
    assert status_number(Context(None), failed=True) == 2
    assert status_number(Context(grpc.StatusCode.NOT_FOUND), failed=True) == 5
    assert 5 not in SERVER_ERRORS and 13 in SERVER_ERRORS and 14 in SERVER_ERRORS


def test_the_client_passes_the_current_span_on_and_nothing_without_one() -> None:
    agent = TracerProvider().get_tracer("agent")
    assert _core.trace_metadata() == []   # opentelemetry imported (this module), but no span is current
    with agent.start_as_current_span("turn") as span:
        metadata = dict(_core.call_metadata("egk_a_b"))
    ctx = span.get_span_context()
    assert metadata["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    assert metadata["authorization"] == "Bearer egk_a_b"


def test_the_ray_hop_carries_the_trace_from_the_edge_to_the_replica(
        tracing: tuple[Tracing, InMemorySpanExporter]) -> None:
    """What server/cluster does: the edge (ingress ``_forward``) passes ``hop_carrier`` with the replica call,
    the replica (``TenantShard.call``) opens ``hop_span`` with it; here both ends in one process, across a
    pickled carrier as Ray would send it."""
    import pickle

    edge, exporter = tracing
    replica = Tracing(exporter=exporter)   # another process's provider, the same collector
    try:
        assert hop_carrier(None) == {}
        with edge.server_span("engram.v1.MemoryService/Search", carrier={}, attributes={}) as rpc:
            carrier = pickle.loads(pickle.dumps(hop_carrier(edge)))
        with hop_span(replica, "engram.cluster.TenantShard/search", carrier):
            replica.stages([("embed", time.monotonic_ns() - 1000, time.monotonic_ns())])
        with hop_span(None, "engram.cluster.TenantShard/search", carrier) as nothing:
            assert nothing is None
        spans = finished(edge, exporter) | finished(replica, exporter)
    finally:
        replica.close()
    hop = spans["engram.cluster.TenantShard/search"]
    assert hop.kind.name == "SERVER" and hop.parent.span_id == rpc.get_span_context().span_id
    assert hop.context.trace_id == rpc.get_span_context().trace_id
    assert hop.attributes == {"rpc.system": "ray", "rpc.service": "engram.cluster.TenantShard", "rpc.method": "search"}
    assert spans["engram.embed"].parent.span_id == hop.context.span_id


def test_a_batched_model_hop_gives_each_traced_request_its_span(
        tracing: tuple[Tracing, InMemorySpanExporter]) -> None:
    """The Encoder / Reranker deployments (server/cluster/deployments.py): one pass served two traced requests,
    whose contexts the replica set around the pass (``carrying``) and the remote stand-in sent (``hop_traces``);
    each request's trace gets a SERVER span under its own context, timed by the pass."""
    import pickle

    replica, exporter = tracing
    encoder = Tracing(exporter=exporter)
    try:
        carriers = []
        for name in ("engram.cluster.TenantShard/search", "engram.cluster.TenantShard/search "):
            with replica.server_span(name, carrier={}, attributes={}) as span:
                carriers.append((span, replica.inject()))
        sent = carrying([c for _, c in carriers], hop_traces)
        assert hop_traces() == [] and sent == [c for _, c in carriers]
        t0 = time.monotonic_ns()
        encoder.served("engram.cluster.Encoder/embed", pickle.loads(pickle.dumps(sent)), start_ns=t0,
                       end_ns=t0 + 7_000_000, attributes={"engram.batch.size": 2, "engram.batch.requests": 1})
        assert encoder.flush()
        served = [s for s in exporter.get_finished_spans() if s.name == "engram.cluster.Encoder/embed"]
    finally:
        encoder.close()
    assert len(served) == 2
    for (parent, _), span in zip(carriers, served, strict=True):
        assert span.kind.name == "SERVER" and span.parent.span_id == parent.get_span_context().span_id
        assert span.context.trace_id == parent.get_span_context().trace_id
        assert span.end_time - span.start_time == 7_000_000
        assert span.attributes == {"rpc.system": "ray", "rpc.service": "engram.cluster.Encoder", "rpc.method": "embed",
                                   "engram.batch.size": 2, "engram.batch.requests": 1}


def test_build_tracing_on_needs_the_sdk_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.errors import ConfigError

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)   # as if not installed
    with pytest.raises(ConfigError, match="engram-server\\[tracing\\]"):
        build_tracing(True)
