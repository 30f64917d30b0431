"""The named speaker's own dense list, through the real server (e5, FAISS, Lucene, the shipped cross-encoder): a
question that names one speaker ("What hobbies does Melanie have?") also fuses the dense hits of that speaker's own
turns, searched with the name taken out (``speakers.SPEAKER_LIST``, on). The other speaker's turns that address her
by name and share the question's words crowd both of the question's own lists; her answers share neither."""

from __future__ import annotations

import time
from unittest import mock

import pytest
from support import start_server

from engram_proto.v1 import messages_pb2 as pb
from server.config import BUNDLED_RERANKER, bundled_reranker
from server.engine import speakers

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

T = "acme/hobbies"
ANSWERS = [
    "Melanie: In my free time I paint landscapes by the lake.",
    "Melanie: For fun I joined a pottery class at the community centre.",
    "Melanie: My favourite pastime is running along the river.",
    "Melanie: I've been learning the violin in my spare time.",
]
ADDRESSING = [f"Caroline: {text}" for text in (
    "Melanie, what hobbies do you have these days?", "Thanks Melanie, hobbies are great for stress.",
    "Melanie, I love hearing about your hobbies!", "Hey Melanie, do you have any new hobbies?",
    "Melanie, hobbies keep me sane too.", "Melanie, which hobby do you enjoy the most?",
    "That is a lovely hobby, Melanie.", "Melanie, you always have such fun hobbies.",
    "Melanie, my hobby is reading, what is yours?", "Good for you, Melanie, a new hobby is exciting.",
    "Melanie, hobbies with kids are the best.", "Melanie, did you pick up that hobby you mentioned?",
    "Melanie, I need a new hobby, any ideas?", "Melanie, how do you find time for hobbies?",
    "Melanie, weekend hobbies sound relaxing.", "Melanie, that hobby sounds expensive!")]
OTHER = [f"Caroline: My hobby this week was {what}." for what in (
    "baking bread", "birdwatching", "chess", "knitting", "photography", "gardening", "origami", "yoga", "cycling",
    "sketching", "journaling", "pilates", "hiking", "calligraphy", "board games", "stargazing", "sewing",
    "rock climbing", "kayaking", "woodworking", "bouldering", "podcasting", "salsa", "fishing", "crochet",
    "geocaching", "skating", "archery", "poetry", "juggling")]
QUESTION = "What hobbies does Melanie have?"


@pytest.fixture(scope="module")
def chat(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path_factory.mktemp("speaker-list") / "data", embedder=embedder,
                           models={"reranker": "bundled"}, advanced={"dedupe_cosine": 1.01})
    client = running.client()
    client.create_tenant(T)
    day = 86_400_000
    start = int(time.time() * 1000) - 60 * day
    turns = ADDRESSING + OTHER
    for i, text in enumerate(turns):
        client.write(T, pb.MemoryInput(content=text, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=start + i * day))
    for i, text in enumerate(ANSWERS):   # each in a session of its own, weeks apart
        client.write(T, pb.MemoryInput(content=text, type=pb.MEMORY_TYPE_EPISODIC,
                                       created_at_ms=start + (3 + 9 * i) * day + 3_600_000))
    yield running, client
    running.stop()


def answer_ranks(client, pipeline, *, listed: bool) -> list[int]:  # type: ignore[no-untyped-def]
    """Where Melanie's answers rank (1-based) in the top 30."""
    with mock.patch.object(pipeline, "speaker_list", listed):
        hits = client.search(T, QUESTION, top_k=30, scoring={"now_ms": int(time.time() * 1000)}).hits
    return [i for i, h in enumerate(hits, 1) if h.memory.content in ANSWERS]


def test_a_named_speakers_own_turns_come_in_through_their_own_list(chat) -> None:  # type: ignore[no-untyped-def]
    running, client = chat
    pipeline = running.app.engine.search_pipeline
    assert speakers.SPEAKER_LIST and pipeline.speaker_list   # on by default
    without, listed = answer_ranks(client, pipeline, listed=False), answer_ranks(client, pipeline, listed=True)
    # measured: [16, 17, 19, 20] without the list, [11, 12, 16, 18] with it
    assert len(listed) == len(ANSWERS) and max(listed) <= 20, listed   # all inside the cross-encoder's 20
    assert sum(listed) < sum(without) and min(listed) < min(without), (listed, without)


def test_the_list_reads_the_question_without_the_name() -> None:
    assert speakers.unnamed(QUESTION, "Melanie") == "What hobbies does they have?"
    assert speakers.unnamed("What is Melanie's favourite hobby?", "Melanie") == "What is their favourite hobby?"


def test_a_speaker_named_before_is_embedded_in_the_questions_own_pass(chat) -> None:  # type: ignore[no-untyped-def]
    # The list's search reads the question without the name: a second forward pass once the candidates name the
    # speaker, unless a question of the tenant named that speaker before (speakers.NAMES_KEPT): then both texts go
    # into the question's own pass, and the list is the same.
    running, client = chat
    pipeline = running.app.engine.search_pipeline
    now = {"now_ms": int(time.time() * 1000)}
    client.search(T, QUESTION, top_k=5, scoring=now)   # names Melanie: kept for the tenant
    shard = running.app.engine.registry.loaded_shard(T)
    assert list(pipeline._named[shard]) == ["Melanie"]
    question = "Which hobbies does Melanie enjoy these days?"
    with mock.patch.object(pipeline, "_embed", wraps=pipeline._embed) as embed:
        hits = client.search(T, question, top_k=30, scoring=now).hits
    assert [c.args[0] for c in embed.call_args_list] == [[question, speakers.unnamed(question, "Melanie")]]
    ranks = [i for i, h in enumerate(hits, 1) if h.memory.content in ANSWERS]
    assert len(ranks) == len(ANSWERS) and max(ranks) <= 20, ranks
    with mock.patch.object(pipeline, "_embed", wraps=pipeline._embed) as embed:   # a question naming nobody kept
        client.search(T, "What hobbies does Caroline have?", top_k=5, scoring=now)
    assert [len(c.args[0]) for c in embed.call_args_list] == [1, 1]   # its own pass, then the list's
    assert list(pipeline._named[shard]) == ["Melanie", "Caroline"]
