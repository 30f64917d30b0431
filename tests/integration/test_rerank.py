"""The rerank stage through the real gRPC server, with a tiny BERT cross-encoder built locally and loaded
through the same code as any Hugging Face model: which hits are reranked, the logits they report, how
the cross-encoder's order is fused with the hybrid order, and the per-request depth."""

from __future__ import annotations

import numpy as np
import pytest
from support import start_server

from server.engine.search import DENSE_WEIGHT, LEXICAL_WEIGHT, RRF_K
from server.fusion.calibration import load_calibration
from server.fusion.rrf import rrf_max
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

NOTES = [
    "Alice drinks green tea every morning before standup.",
    "Bob prefers espresso and never drinks tea.",
    "The team moved the tea supply order to the second Monday of the month.",
    "Alice's green tea comes from a shop near the Kyoto office.",
    "Standup starts at 9:30 and runs fifteen minutes.",
    "Carol keeps a jar of chamomile tea for late evenings.",
    "The coffee machine on floor three was repaired on Tuesday.",
]
QUERY = "what tea does alice drink"
PLAIN = {"disable_decay": True, "disable_importance": True}  # final == relevance: the ranks are the rerank's


@pytest.fixture
def rerank_server(tmp_path, jvm, embedder, tiny_reranker):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path / "data", embedder=embedder, reranker=tiny_reranker,
                           search={"rerank_depth": 3})
    client = running.client()
    client.create_tenant("acme/rr")
    client.write("acme/rr", *NOTES)
    yield running, client
    running.stop()


def _search(client, **query) -> pb.QueryResult:  # type: ignore[no-untyped-def]
    return client.search("acme/rr", QUERY, top_k=len(NOTES), scoring=pb.Scoring(**PLAIN), **query)


def test_default_depth_reranks_the_fused_head_with_the_models_logits(rerank_server, tiny_reranker) -> None:
    _, client = rerank_server
    result = _search(client)
    assert result.timings.rerank_ns > 0
    reranked = [h for h in result.hits if h.breakdown.HasField("rerank")]
    assert len(reranked) == 3
    # The three reranked hits are the fused top three, and their logits are the model's own.
    fused = sorted(result.hits, key=lambda h: -h.breakdown.rrf)
    assert {h.memory.memory_id for h in reranked} == {h.memory.memory_id for h in fused[:3]}
    logits = tiny_reranker.score([(QUERY, h.memory.content) for h in fused[:3]])
    for hit, logit in zip(fused[:3], logits.tolist(), strict=True):
        assert hit.breakdown.rerank == pytest.approx(logit, abs=1e-4)
    # Relevance is the calibrated probability from the logit and the fused score (server/fusion/calibration.py).
    top = rrf_max(k=RRF_K, weights=(DENSE_WEIGHT, LEXICAL_WEIGHT))
    assert all(h.breakdown.dense_rank > 0 for h in fused[:3])   # 7 notes: all in the dense list, cosine known
    best_dense = next(h.breakdown.dense_score for h in result.hits if h.breakdown.dense_rank == 1)
    best_bm25 = next((h.breakdown.bm25_score for h in result.hits if h.breakdown.bm25_rank == 1), 1.0)
    dense = np.array([h.breakdown.dense_score for h in fused[:3]])
    expected = load_calibration().rerank({"logit": logits.astype("float64"),
                                          "logit_gap": logits.astype("float64") - float(logits.max()),
                                          "rrf": [h.breakdown.rrf / top for h in fused[:3]],
                                          "dense": dense, "dense_gap": dense - best_dense,
                                          "bm25": [h.breakdown.bm25_score / best_bm25 for h in fused[:3]]})
    for hit, rel in zip(fused[:3], expected.tolist(), strict=True):
        assert hit.breakdown.relevance == pytest.approx(rel, rel=1e-4)
    # Every reranked hit outranks every hit past the depth, which keep their fused order.
    tail = [h for h in result.hits if not h.breakdown.HasField("rerank")]
    assert max(h.breakdown.relevance for h in tail) < min(h.breakdown.relevance for h in reranked)
    assert [h.memory.memory_id for h in result.hits[3:]] == [h.memory.memory_id for h in fused[3:]]
    assert [h.breakdown.final for h in result.hits] == sorted((h.breakdown.final for h in result.hits), reverse=True)


def test_per_request_depth_and_opt_out(rerank_server) -> None:
    _, client = rerank_server
    deeper = _search(client, rerank_depth=5)
    assert sum(h.breakdown.HasField("rerank") for h in deeper.hits) == 5
    off = _search(client, rerank_depth=-1)
    assert off.timings.rerank_ns == 0 and not any(h.breakdown.HasField("rerank") for h in off.hits)
    # Without the rerank, hits keep the fused order: by the calibrated relevance of the fused candidates, of which
    # the RRF score is one input (server/fusion/calibration.py), not by RRF alone.
    assert [h.memory.memory_id for h in off.hits] == [
        h.memory.memory_id for h in sorted(off.hits, key=lambda h: -h.breakdown.relevance)]


def test_info_names_the_reranker(rerank_server) -> None:
    _, client = rerank_server
    info = client.memory.Info(spb.InfoRequest(), metadata=client.metadata)
    assert info.reranker.name and "NOT TRAINED" in info.reranker.provenance and info.reranker.device == "cpu"


CJK_QUERY = "爱丽丝喝什么茶"


def test_cjk_queries_keep_the_fused_order_unless_a_depth_is_asked(rerank_server) -> None:
    # search.rerank_cjk is false by default: the bundled cross-encoder reads English only.
    _, client = rerank_server
    client.write("acme/rr", "爱丽丝每天早上喝绿茶。")
    default = client.search("acme/rr", CJK_QUERY, top_k=5, scoring=pb.Scoring(**PLAIN))
    assert default.hits and default.timings.rerank_ns == 0
    assert not any(h.breakdown.HasField("rerank") for h in default.hits)
    asked = client.search("acme/rr", CJK_QUERY, top_k=5, scoring=pb.Scoring(**PLAIN), rerank_depth=2)
    assert sum(h.breakdown.HasField("rerank") for h in asked.hits) == 2
    english = _search(client)  # the same server still reranks English queries at the default depth
    assert sum(h.breakdown.HasField("rerank") for h in english.hits) == 3


def test_rerank_cjk_reranks_cjk_queries_at_the_default_depth(tmp_path, jvm, embedder, tiny_reranker) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, reranker=tiny_reranker,
                           search={"rerank_depth": 3, "rerank_cjk": True})
    try:
        client = running.client()
        client.create_tenant("acme/zh")
        client.write("acme/zh", *NOTES, "爱丽丝每天早上喝绿茶。")
        result = client.search("acme/zh", CJK_QUERY, top_k=5, scoring=pb.Scoring(**PLAIN))
        assert sum(h.breakdown.HasField("rerank") for h in result.hits) == 3
    finally:
        running.stop()
