"""Tracing through the real in-process server (small real models, FAISS, Lucene) into a real OTLP/HTTP receiver
(tests/otlp_support.py): a Search is one SERVER span under the caller's ``traceparent`` with a child per stage,
timed by the same clocks as the reply's timings; a Write has its embedding and commit (log, indexes); the MCP
server passes a tool call's trace context on; no attribute carries content, query text, keys or tenant ids;
with tracing off nothing is sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider

from engram_client import EngramClient
from engram_integrations.mcp.server import Backend, build_server
from otlp_support import OtlpReceiver, ReceivedSpan, tree
from support import RunningServer, start_server

TENANT = "heron-watch"
MEMORY = "The grey heron nests in the alder carr beside the quarry lake every March"
QUERY = "where does the grey heron nest in spring"
SEARCH, WRITE = "engram.v1.MemoryService/Search", "engram.v1.MemoryService/Write"
SEARCH_STAGES = {"engram.queue", "engram.embed", "engram.bm25", "engram.ann", "engram.fusion", "engram.rerank",
                 "engram.decay"}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder: Any, tiny_reranker: Any,
           ) -> Iterator[tuple[RunningServer, OtlpReceiver, str]]:
    receiver = OtlpReceiver()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
        env.setenv("OTEL_SERVICE_NAME", "engram-under-test")
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        running = start_server(tmp_path_factory.mktemp("traced") / "data", embedder=embedder,
                               reranker=tiny_reranker, tracing=True)
    admin = running.client()
    admin.create_tenant(TENANT)
    key = admin.create_key(tenant_ids=[TENANT])
    yield running, receiver, key
    running.stop()
    receiver.close()


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_span_id == parent.span_id and s.trace_id == parent.trace_id]


def server_span(receiver: OtlpReceiver, name: str, parent_span_id: str, stages: set[str]) -> tuple[
        ReceivedSpan, list[ReceivedSpan]]:
    """The SERVER span ``name`` whose parent is ``parent_span_id``, once its stage spans have arrived too."""
    def complete(spans: list[ReceivedSpan]) -> bool:
        roots = [s for s in spans if s.name == name and s.parent_span_id == parent_span_id]
        return bool(roots) and stages <= {c.name for c in children(spans, roots[0])}

    spans = receiver.wait_for(complete)
    roots = [s for s in spans if s.name == name and s.parent_span_id == parent_span_id]
    assert len(roots) == 1, [s.name for s in spans]
    return roots[0], spans


def test_search_is_one_server_span_under_the_callers_trace_with_a_child_per_stage(traced: Any) -> None:
    running, receiver, key = traced
    agent = TracerProvider().get_tracer("agent")   # the application's own SDK, not the server's
    with EngramClient(running.address, key=key) as client:
        client.write(TENANT, [MEMORY])
        with agent.start_as_current_span("agent.turn") as turn:
            result = client.search(TENANT, QUERY, rerank_depth=5)
    caller = turn.get_span_context()
    root, spans = server_span(receiver, SEARCH, f"{caller.span_id:016x}", SEARCH_STAGES)

    assert root.kind == "SERVER" and root.trace_id == f"{caller.trace_id:032x}"
    assert root.attributes == {"rpc.system": "grpc", "rpc.service": "engram.v1.MemoryService", "rpc.method": "Search",
                               "rpc.grpc.status_code": 0}
    assert root.resource["service.name"] == "engram-under-test"
    stages = {c.name: c for c in children(spans, root)}
    assert SEARCH_STAGES <= set(stages) <= SEARCH_STAGES | {"engram.expand", "engram.feedback"}
    for stage in stages.values():
        assert stage.kind == "INTERNAL" and root.start_ns <= stage.start_ns <= stage.end_ns <= root.end_ns
        assert stage.attributes["engram.batch.size"] == result.timings.batch_size >= 1
    # The spans carry the very measurements of the reply's timings: the same clock reads, not a second timing.
    t = result.timings
    def ns(*names: str) -> int:
        return sum(stages[n].end_ns - stages[n].start_ns for n in names if n in stages)

    for names, timing in ((("engram.queue",), t.queue_ns), (("engram.embed",), t.embed_ns),
                          (("engram.bm25",), t.bm25_ns), (("engram.ann", "engram.feedback"), t.ann_ns),
                          (("engram.fusion", "engram.expand"), t.fusion_ns), (("engram.rerank",), t.rerank_ns),
                          (("engram.decay",), t.decay_ns)):
        assert ns(*names) == timing > 0, names
    assert stages["engram.rerank"].attributes["engram.rerank.depth"] == t.rerank_depth_used == 5
    assert stages["engram.decay"].attributes["engram.hits"] == len(result.hits) >= 1
    assert stages["engram.queue"].end_ns <= stages["engram.embed"].start_ns
    assert max(stages["engram.ann"].end_ns, stages["engram.bm25"].end_ns) <= stages["engram.fusion"].start_ns
    assert stages["engram.fusion"].end_ns <= stages["engram.rerank"].start_ns <= stages["engram.decay"].start_ns
    if "engram.expand" in stages:   # the second hop (server/engine/expand.py): after the rerank, before ranking
        assert stages["engram.rerank"].end_ns <= stages["engram.expand"].start_ns
        assert stages["engram.expand"].end_ns <= stages["engram.decay"].start_ns
    print("\n".join(tree(spans, root)))   # the tree docs/operations/tracing.md shows


def test_write_has_its_embedding_and_a_commit_with_log_and_index_spans(traced: Any) -> None:
    running, receiver, key = traced
    agent = TracerProvider().get_tracer("agent")
    with EngramClient(running.address, key=key) as client, agent.start_as_current_span("agent.remember") as step:
        client.write(TENANT, ["The heron colony counted eleven nests in the survey"])
    root, spans = server_span(receiver, WRITE, f"{step.get_span_context().span_id:016x}",
                              {"engram.embed", "engram.commit"})
    assert root.attributes["rpc.grpc.status_code"] == 0
    below = {c.name: c for c in children(spans, root)}
    assert {"engram.embed", "engram.commit"} <= set(below) <= {"engram.load", "engram.embed", "engram.commit"}
    assert below["engram.embed"].attributes == {"engram.memories": 1}
    commit = below["engram.commit"]
    assert below["engram.embed"].end_ns <= commit.start_ns and commit.end_ns <= root.end_ns
    steps = {c.name: c for c in children(spans, commit)}
    assert set(steps) == {"engram.wal", "engram.index"}
    assert commit.start_ns <= steps["engram.wal"].start_ns <= steps["engram.wal"].end_ns \
        <= steps["engram.index"].start_ns <= steps["engram.index"].end_ns <= commit.end_ns
    print("\n".join(tree(spans, root)))


def test_a_call_that_loads_the_tenant_has_a_load_span(traced: Any) -> None:
    running, receiver, key = traced
    agent = TracerProvider().get_tracer("agent")
    assert running.app.engine.registry.evict(TENANT)   # out of memory: the next call loads it from its files
    with EngramClient(running.address, key=key) as client, agent.start_as_current_span("agent.cold") as step:
        client.search(TENANT, "which bird nests by the lake")
    root, spans = server_span(receiver, SEARCH, f"{step.get_span_context().span_id:016x}",
                              {"engram.load", "engram.embed"})
    stages = {c.name: c for c in children(spans, root)}
    assert stages["engram.load"].end_ns <= stages["engram.queue"].start_ns


def test_a_refused_call_records_its_status_code(traced: Any) -> None:
    running, receiver, key = traced
    agent = TracerProvider().get_tracer("agent")
    with EngramClient(running.address, key=key) as client, agent.start_as_current_span("agent.lost") as step:
        with pytest.raises(Exception, match="PERMISSION_DENIED|does not cover"):
            client.search("someone-else", QUERY)
    root, _ = server_span(receiver, SEARCH, f"{step.get_span_context().span_id:016x}", set())
    assert root.attributes["rpc.grpc.status_code"] == 7   # PERMISSION_DENIED: the caller's doing, not an error
    assert root.status_code == 0


def test_the_mcp_server_passes_a_tool_calls_trace_context_on(traced: Any) -> None:
    running, receiver, key = traced
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

    async def call() -> Any:
        backend = Backend(running.address, tenant_id=TENANT)
        try:
            server = build_server(backend, key_of=lambda ctx: key)
            from mcp import Client

            async with Client(server) as client:
                return await client.call_tool("recall", {"query": QUERY, "gate": False},
                                              meta={"traceparent": f"00-{trace_id}-{span_id}-01"})
        finally:
            await backend.close()

    reply = anyio.run(call)
    assert not reply.is_error, reply
    root, _ = server_span(receiver, SEARCH, span_id, set())
    assert root.trace_id == trace_id


def test_no_attribute_or_name_carries_content_query_key_or_tenant(traced: Any) -> None:
    running, receiver, key = traced
    with EngramClient(running.address, key=key) as client:
        client.write(TENANT, ["Swallows returned to the boathouse eaves on the ninth of April"])
        client.search(TENANT, "when did the swallows come back")
    running.app.engine.tracing.flush()
    spans = receiver.wait_for(lambda s: sum(x.name == SEARCH for x in s) >= 2)
    assert len(spans) > 10
    secrets = [MEMORY, QUERY, "Swallows returned", "swallows come back", key, key.split("_", 2)[2], TENANT, "heron"]
    for span in spans:
        text = repr((span.name, span.attributes, span.resource)).lower()
        assert not [s for s in secrets if s.lower() in text], span


def test_with_tracing_off_nothing_is_sent(tmp_path: Any, jvm: None, embedder: Any) -> None:
    receiver = OtlpReceiver()
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
            env.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
            running = start_server(tmp_path / "data", embedder=embedder)   # tracing: the default
        try:
            assert running.app.engine.tracing is None
            admin = running.client()
            admin.create_tenant(TENANT)
            agent = TracerProvider().get_tracer("agent")
            with EngramClient(running.address, key=admin.create_key(tenant_ids=[TENANT])) as client, \
                    agent.start_as_current_span("agent.turn"):
                client.write(TENANT, [MEMORY])
                assert client.search(TENANT, QUERY).hits
        finally:
            running.stop()
        assert receiver.wait_for(lambda s: bool(s), timeout_s=0.5) == [] and receiver.requests == 0
    finally:
        receiver.close()
