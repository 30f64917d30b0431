"""What the cross-encoder reads of a long chat turn, through the real server (the packaged embedder, FAISS, Lucene),
with ``passages.DENSE_FOCUS`` switched on: the window where the turn's passage vector closest to the question lies
(server/engine/passages.py ``dense_focus``), so a fact deep in ~1 KB of talk is read even when the question shares
no word with it, where the words alone (the default) pick the turn's first window. The rule is measured and not the
default (docs/concepts/retrieval.md); this keeps the measured variant what it says it is."""

from __future__ import annotations

import random

import pytest
from support import start_server

from benchmarks.quality.long_turns import long_turn
from engram_proto.v1 import messages_pb2 as pb
from server.engine import passages
from server.text import CONTEXT_MARK

# (a fact said deep in a long turn, a question that shares none of its words)
FACTS = (
    ("Maria adopted a grey kitten named Pepper last weekend.", "What did she call the new cat?"),
    ("Tom finished the Boston marathon in three hours and forty minutes.", "How quickly did he complete that race?"),
    ("We booked the cabin by Lake Tahoe for the second week of August.", "Which dates is our mountain lodge reserved?"),
    ("Grandma's secret ingredient in the apple pie is a pinch of cardamom.", "What spice goes into her dessert?"),
    ("Jenna switched her major from biology to architecture this semester.", "What does she study at college now?"),
    ("Sam lost his passport at the train station in Lyon.", "Where did his travel document go missing?"),
    ("Priya planted tomatoes, basil and three kinds of peppers.", "Which vegetables are growing in her garden?"),
    ("Dad retired from the fire department after thirty-two years.", "How long was my father a firefighter?"),
)
CREATED_MS = 1_767_225_600_000


@pytest.fixture(autouse=True)
def _window_reads(monkeypatch):  # type: ignore[no-untyped-def]
    """These tests read a long turn's TURN_WINDOW windows: the sentence reads (the default) are off here
    (tests/unit/engine/test_sentence_reads.py tests them)."""
    monkeypatch.setattr(passages, "TURN_SENTENCES", 0)


@pytest.fixture(scope="module")
def server(tmp_path_factory, jvm, embedder, tiny_reranker):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path_factory.mktemp("dense-focus") / "data", embedder=embedder,
                           reranker=tiny_reranker, advanced={"dedupe_cosine": 1.01})
    client = running.client()
    client.create_tenant("acme/focus")
    rng = random.Random(7)
    client.write("acme/focus", *[pb.MemoryInput(content=long_turn(f"user: {fact}", rng, (1000, 300, 300)),
                                                type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=CREATED_MS)
                                 for fact, _ in FACTS])
    yield running, client
    running.stop()


def read_facts(running, client, tiny_reranker) -> int:  # type: ignore[no-untyped-def]
    """How many questions had the cross-encoder read the window that holds their fact."""
    seen: list[str] = []
    tokenize = tiny_reranker.tokenize

    def recording(pairs):  # type: ignore[no-untyped-def]
        seen.extend(text for _, text in pairs)
        return tokenize(pairs)

    tiny_reranker.tokenize = recording
    try:
        found = 0
        for fact, question in FACTS:
            running.app.engine.pair_cache.forget_tenant("acme/focus")
            seen.clear()
            hits = client.search("acme/focus", question, top_k=len(FACTS), rerank_depth=len(FACTS)).hits
            assert len(hits) == len(FACTS) and len(seen) == len(FACTS)   # every long turn read once
            # the window read, not the context after it (the turn before, written in the same Write, holds its own)
            found += any(fact in text.partition(CONTEXT_MARK)[0] for text in seen)
        return found
    finally:
        del tiny_reranker.tokenize


def test_the_cross_encoder_reads_the_closest_passage(server, tiny_reranker) -> None:  # type: ignore[no-untyped-def]
    running, client = server
    pipeline = running.app.engine.search_pipeline
    assert not pipeline.dense_focus and pipeline.focus_ready   # off by default (measured, not adopted); ready
    words = read_facts(running, client, tiny_reranker)
    pipeline.dense_focus = True
    try:
        focused = read_facts(running, client, tiny_reranker)
    finally:
        pipeline.dense_focus = False
    assert focused >= len(FACTS) - 1, focused
    assert words <= 2, words   # no shared word: the first window, ~1 KB before the fact
