"""A long chat turn read in parts by the real cross-encoder (engram-reranker-v1) through the real server
(server/engine/passages.py ``rerank_texts``; docs/concepts/retrieval.md): by default three sentence units
(``TURN_SENTENCES``), its rerank logit the best of theirs, the line that answers read with little talk around it and
scoring far above the 400-character window's read; with the sentence reads off and ``TURN_READS`` above 1, window by
window, so the answer that shares no word with the question is read although best_window reads another window."""

from __future__ import annotations

import pytest
from support import start_server

from engram_proto.v1 import messages_pb2 as pb
from server.config import BUNDLED_RERANKER, bundled_reranker
from server.engine import passages
from server.text import indexed_text

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

TALK = ("What did not work last time is worth writing down before you plan the next one, and what did work "
        "deserves a note too. ")
EVIDENCE = "The grey cat we adopted last weekend is called Pepper."
QUERY = "What did Maria name her kitten?"
CREATED_MS = 1_767_225_600_000


def write_turns(tmp_path, embedder, long: str):  # type: ignore[no-untyped-def]
    """A server with ``long`` and two short turns about Maria written, and the long turn's hit for QUERY."""
    running = start_server(tmp_path / "data", embedder=embedder, models={"reranker": "bundled"},
                           advanced={"dedupe_cosine": 1.01})
    try:
        client = running.client()
        client.create_tenant("acme/maria")
        notes = [long, "user: Maria wants a dog one day.", "user: Maria asked what a kitten should eat."]
        client.write("acme/maria", *[pb.MemoryInput(content=t, type=pb.MEMORY_TYPE_EPISODIC,
                                                    created_at_ms=CREATED_MS) for t in notes])
        result = client.search("acme/maria", QUERY, top_k=3, rerank_depth=3,
                               scoring=pb.Scoring(disable_decay=True, disable_importance=True))
        hit = next(h for h in result.hits if h.memory.content == long)
        assert hit.breakdown.HasField("rerank")
        memory = running.app.engine.registry.shard("acme/maria").store.get(hit.memory.memory_id)
    except BaseException:
        running.stop()
        raise
    return running, result, hit, memory


def test_a_long_turn_scores_the_best_of_its_sentence_units(tmp_path, jvm, embedder) -> None:  # type: ignore[no-untyped-def]
    assert passages.TURN_SENTENCES == 3   # the default
    said = "Maria: We adopted a grey kitten last weekend and named her Pepper."
    long = "assistant: " + TALK * 4 + "Earlier in our chat — " + said + " " + TALK * 3
    assert len(long) > passages.PASSAGE_CHARS
    running, result, hit, memory = write_turns(tmp_path, embedder, long)
    try:
        texts = passages.rerank_texts(QUERY, memory)
        assert len(texts) == 3 and all(len(t) < 260 and "context:" not in t for t in texts)
        reranker = running.app.engine.search_pipeline.reranker
        logits = [float(x) for x in reranker.score([(QUERY, t) for t in texts])]
        assert hit.breakdown.rerank == pytest.approx(max(logits), abs=0.25), (hit.breakdown.rerank, logits)
        assert said in texts[max(range(3), key=lambda i: logits[i])]
        # the line read in its short unit scores well above the 400-character window's read (the rule before), and
        # no higher than the line alone: the less talk around it, the better it reads
        alone = float(reranker.score([(QUERY, indexed_text(said, dated=True, created_at_ms=CREATED_MS))])[0])
        window = float(reranker.score([(QUERY, passages.rerank_text(QUERY, memory))])[0])
        assert window + 2.0 < max(logits) <= alone + 0.25, (logits, alone, window)
        assert result.hits[0].memory.content == long
    finally:
        running.stop()


def test_a_long_turn_scores_the_best_of_its_windows(tmp_path, jvm, embedder, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(passages, "TURN_SENTENCES", 0)   # the windows' rule, the sentence reads off
    monkeypatch.setattr(passages, "TURN_READS", 8)   # measured, not the default (1): the rule of several reads
    long = "assistant: " + TALK * 4 + "By the way, " + EVIDENCE + " " + TALK * 3
    running, _, hit, memory = write_turns(tmp_path, embedder, long)
    try:
        texts = passages.rerank_texts(QUERY, memory)
        assert len(texts) > 1 and EVIDENCE not in texts[0]   # the one window best_window picks misses the answer
        reranker = running.app.engine.search_pipeline.reranker
        logits = [float(x) for x in reranker.score([(QUERY, t) for t in texts])]
        best = max(range(len(texts)), key=lambda i: logits[i])
        assert EVIDENCE in texts[best] and logits[best] > logits[0] + 1.0, logits   # the answer's window reads best
        assert hit.breakdown.rerank == pytest.approx(logits[best], abs=0.25), (hit.breakdown.rerank, logits)
    finally:
        running.stop()
