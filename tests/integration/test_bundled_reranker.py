"""engram-reranker-v1, the cross-encoder the repository ships under models/weights, loaded the way
``make serve`` loads it (``models.reranker = "bundled"``, the default) and ranking through the real server."""

from __future__ import annotations

import pytest
from support import start_server

from server.config import BUNDLED_RERANKER, bundled_reranker
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

ANSWER = "Alice is allergic to peanuts and carries an epinephrine pen."
NOTES = [
    "Alice likes the peanut butter cookies from the bakery on Fifth Street.",
    ANSWER,
    "Bob is allergic to cats, so the offsite cabin must be pet-free.",
    "Alice's flight to Berlin leaves on Friday at 9am.",
    "The team lunch order included a peanut-free option for everyone.",
    "Alice prefers aisle seats and vegetarian meals on long flights.",
]


def test_the_bundled_reranker_is_served_by_default_and_puts_the_answer_first(tmp_path, jvm, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, models={"reranker": "bundled"})
    try:
        client = running.client()
        info = client.memory.Info(spb.InfoRequest(), metadata=client.metadata)
        assert info.reranker.name == "engram-reranker-v1"
        assert "make reranker" in info.reranker.provenance and "all-MiniLM-L6-v2" in info.reranker.provenance
        client.create_tenant("acme/alice")
        client.write("acme/alice", *NOTES)
        result = client.search("acme/alice", "what is alice allergic to", top_k=len(NOTES),
                               scoring=pb.Scoring(disable_decay=True, disable_importance=True))
        reranked = [h for h in result.hits if h.breakdown.HasField("rerank")]
        # The auto depth (20 in bfloat16, 5 in float32: a CPU without native bfloat16) as the controller trims it
        # to the latency target on a slow CPU; every candidate within it is reranked.
        depth = result.timings.rerank_depth_used
        assert depth >= 1 and result.timings.rerank_ns > 0
        assert len(reranked) == min(len(NOTES), depth)
        assert result.hits[0].memory.content == ANSWER
        assert max(reranked, key=lambda h: h.breakdown.rerank).memory.content == ANSWER
    finally:
        running.stop()
