"""A long chat turn read window by window by the real cross-encoder (engram-reranker-v1) through the real server:
with ``passages.TURN_READS`` above 1 its rerank logit is the best of its windows' (server/engine/passages.py
``rerank_texts``), so the answer that shares
no word with the question is read although best_window reads another window (docs/concepts/retrieval.md)."""

from __future__ import annotations

import pytest
from support import start_server

from engram_proto.v1 import messages_pb2 as pb
from server.config import BUNDLED_RERANKER, bundled_reranker
from server.engine import passages

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

TALK = ("What did not work last time is worth writing down before you plan the next one, and what did work "
        "deserves a note too. ")
EVIDENCE = "The grey cat we adopted last weekend is called Pepper."
QUERY = "What did Maria name her kitten?"
CREATED_MS = 1_767_225_600_000


def test_a_long_turn_scores_the_best_of_its_windows(tmp_path, jvm, embedder, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(passages, "TURN_READS", 8)   # measured, not the default (1): the rule of several reads
    running = start_server(tmp_path / "data", embedder=embedder, models={"reranker": "bundled"},
                           advanced={"dedupe_cosine": 1.01})
    try:
        client = running.client()
        client.create_tenant("acme/maria")
        long = "assistant: " + TALK * 4 + "By the way, " + EVIDENCE + " " + TALK * 3
        notes = [long, "user: Maria wants a dog one day.", "user: Maria asked what a kitten should eat."]
        client.write("acme/maria", *[pb.MemoryInput(content=t, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=CREATED_MS)
                                     for t in notes])
        result = client.search("acme/maria", QUERY, top_k=3, rerank_depth=3,
                               scoring=pb.Scoring(disable_decay=True, disable_importance=True))
        hit = next(h for h in result.hits if h.memory.content == long)
        assert hit.breakdown.HasField("rerank")
        shard = running.app.engine.registry.shard("acme/maria")
        memory = shard.store.get(hit.memory.memory_id)
        texts = passages.rerank_texts(QUERY, memory)
        assert len(texts) > 1 and EVIDENCE not in texts[0]   # the one window best_window picks misses the answer
        reranker = running.app.engine.search_pipeline.reranker
        logits = [float(x) for x in reranker.score([(QUERY, t) for t in texts])]
        best = max(range(len(texts)), key=lambda i: logits[i])
        assert EVIDENCE in texts[best] and logits[best] > logits[0] + 1.0, logits   # the answer's window reads best
        assert hit.breakdown.rerank == pytest.approx(logits[best], abs=0.25), (hit.breakdown.rerank, logits)
    finally:
        running.stop()
