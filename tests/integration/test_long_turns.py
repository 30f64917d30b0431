"""A fact deep in a long chat turn, through the real server (the packaged embedder, FAISS, Lucene): the dense side
finds it through a chat turn's narrow passage windows (advanced.turn_passage_tokens, the default), where the model's
whole window, a fact diluted in ~1 KB of talk around it, loses to short turns on the same topic
(docs/concepts/retrieval.md "Chat turns")."""

from __future__ import annotations

import random

import pytest
from support import start_server

from benchmarks.quality.long_turns import FILLER, long_turn
from engram_proto.v1 import messages_pb2 as pb

# (the fact said deep in a long turn, the question that asks for it, two short turns on its topic)
FACTS = (
    ("Maria adopted a grey kitten named Pepper last weekend.", "What is the name of Maria's kitten?",
     "Maria is thinking about getting a dog from the shelter.", "Maria asked what a kitten should eat."),
    ("My brother Tom finished his first marathon in Boston in three hours and forty minutes.",
     "How long did Tom take to run the Boston marathon?", "Tom started jogging in the park on Sundays.",
     "Tom wants to run a marathon one day."),
    ("We booked the cabin by Lake Tahoe for the second week of August.", "When is the Lake Tahoe cabin booked for?",
     "We talked about a trip to the mountains someday.", "Lake Tahoe is beautiful in the summer."),
    ("Grandma's secret ingredient in the apple pie is a pinch of cardamom.",
     "What is the secret ingredient in grandma's apple pie?", "Grandma bakes a lot of pies for the holidays.",
     "I love apple pie with ice cream."),
    ("Jenna switched her major from biology to architecture this semester.", "What did Jenna change her major to?",
     "Jenna is taking classes at the university.", "Jenna is not sure her major is right for her."),
    ("The new violin teacher, Mr. Alvarez, gives lessons on Thursday evenings.",
     "Who teaches the violin lessons on Thursday?", "I have always wanted to learn a musical instrument.",
     "Violin lessons are expensive in our town."),
    ("Sam lost his passport at the train station in Lyon and had to visit the consulate.",
     "Where did Sam lose his passport?", "Sam travels to France a lot for work.",
     "Sam needs to renew his passport soon."),
    ("Our team won the regional chess tournament with a final score of five to one.",
     "What was the final score of the chess tournament?", "Our team practices chess after school.",
     "The chess tournament starts next month."),
    ("Priya planted tomatoes, basil and three kinds of peppers in her new garden.",
     "What did Priya plant in her garden?", "Priya moved into a house with a backyard.",
     "Priya loves gardening shows on TV."),
    ("Dad retired from the fire department after thirty-two years of service.",
     "How many years did Dad serve in the fire department?", "Dad enjoys fishing on weekends.",
     "The fire department held an open day."),
)


CREATED_MS = 1_767_225_600_000   # 2026-01-01: the date header every memory's text starts with, fixed


def haystack() -> list[pb.MemoryInput]:
    rng = random.Random(5)
    texts = [long_turn(f"user: {fact}", rng, (1000, 500, 500)) for fact, *_ in FACTS]   # the fact after ~1 KB
    texts += [f"user: {said}" for _, _, *near in FACTS for said in near]
    texts += [f"user: {rng.choice(FILLER)}" for _ in range(20)]
    return [pb.MemoryInput(content=t, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=CREATED_MS) for t in texts]


@pytest.fixture(scope="module")
def server(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    # the filler makes long turns alike: keep each
    running = start_server(tmp_path_factory.mktemp("long-turns") / "data", embedder=embedder,
                           advanced={"dedupe_cosine": 1.01})
    client = running.client()
    stage = running.app.engine.write_stage
    default = stage.turn_tokens   # the server's default; 0: a turn's windows as any memory's (the model's window)
    assert default and embedder.passage_tokens == 0
    for tenant, width in (("acme/narrow", default), ("acme/wide", 0)):
        stage.turn_tokens = width
        try:
            client.create_tenant(tenant)
            client.write(tenant, *haystack())
        finally:
            stage.turn_tokens = default
    yield client
    running.stop()


def ranks(client, tenant: str) -> list[int]:  # type: ignore[no-untyped-def]
    """Where each question's long turn ranks on the dense side alone (1-based; 6: not in the top 5), each memory
    once."""
    out = []
    for fact, question, *_ in FACTS:
        hits = client.search(tenant, question, top_k=5, dense_only=True).hits
        assert len({h.memory.memory_id for h in hits}) == len(hits) == 5   # one hit per memory
        out.append(next((i for i, h in enumerate(hits, 1) if fact in h.memory.content), 6))
    return out


def test_a_fact_deep_in_a_long_turn_is_found_through_narrow_windows(server) -> None:  # type: ignore[no-untyped-def]
    narrow, wide = ranks(server, "acme/narrow"), ranks(server, "acme/wide")
    # measured: narrow (48 tokens) every one first, the model's whole window [3, 2, 1, 2, 4, 3, 4, 1, 4, 3]
    assert max(narrow) <= 2 and sum(narrow) <= 13, narrow
    assert wide.count(1) <= 4 and sum(wide) >= 20, wide   # the whole window: short turns on the topic win
