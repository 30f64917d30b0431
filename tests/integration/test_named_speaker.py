"""The speaker a question names, through the real server (e5, FAISS, Lucene, the shipped cross-encoder): in a
conversation written as ``"<speaker>: <text>"`` turns, a question about one speaker raises that speaker's turns by
``SPEAKER_FACTOR`` (on by default); the other speaker's turns, a question naming both speakers and a fact that merely
starts with the name keep their relevance. In a chat written with roles (``"user: …"``, ``"assistant: …"``, as the
SDK's ``write_conversation`` sends ``("user", text)`` turns), a first-person question names the user
(``speakers.FIRST_PERSON``); a question in the second person leaves the roles alone."""

from __future__ import annotations

import time
from unittest import mock

import pytest
from support import start_server

from engram_client._core import conversation_inputs
from server.config import BUNDLED_RERANKER, bundled_reranker
from server.engine import speakers
from engram_proto.v1 import messages_pb2 as pb

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

T = "acme/chat"
CHAT = [
    "Caroline: I went to an LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, Caroline, that sounds amazing! I am so glad you found a group like that.",
    "Caroline: Lately I have been researching adoption agencies; having a family has been my dream.",
    "Melanie: Thanks for the tip, Caroline. Doing research and readying myself emotionally makes sense.",
    "Melanie: I signed up for a pottery class yesterday, it is like therapy for me.",
]
FACT = "Caroline: prefers short answers"   # a fact (SEMANTIC) that starts with the name: not a turn


@pytest.fixture(scope="module")
def chat(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path_factory.mktemp("speaker") / "data", embedder=embedder,
                           models={"reranker": "bundled"})
    client = running.client()
    client.create_tenant(T)
    at = int(time.time() * 1000) - 86_400_000
    for i, text in enumerate(CHAT):
        client.write(T, pb.MemoryInput(content=text, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=at + i * 1000))
    client.write(T, pb.MemoryInput(content=FACT, type=pb.MEMORY_TYPE_SEMANTIC, created_at_ms=at))
    yield running, client
    running.stop()


def _relevance_with(client, tenant: str, query: str, target: object, name: str,  # type: ignore[no-untyped-def]
                    value: object) -> dict[str, float]:
    """Each hit's relevance for ``query`` with ``target.name`` set to ``value`` for the search."""
    with mock.patch.object(target, name, value):
        hits = client.search(tenant, query, top_k=10, scoring={"now_ms": int(time.time() * 1000)}).hits
    return {h.memory.content: h.breakdown.relevance for h in hits}


def _relevance(running, client, query: str, *, factor: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return _relevance_with(client, T, query, running.app.engine.search_pipeline, "speaker_factor", factor)


def test_a_question_about_one_speaker_raises_that_speakers_turns(chat) -> None:
    running, client = chat
    assert running.app.engine.search_pipeline.speaker_factor == speakers.SPEAKER_FACTOR > 1   # on by default
    query = "What did Caroline research?"
    off = _relevance(running, client, query, factor=1.0)
    on = _relevance(running, client, query, factor=speakers.SPEAKER_FACTOR)
    assert set(on) == set(off) == {*CHAT, FACT}
    for text in CHAT:
        want = min(off[text] * speakers.SPEAKER_FACTOR, speakers.MAX_RELEVANCE) if text.startswith("Caroline:") \
            else off[text]
        assert on[text] == pytest.approx(max(want, off[text]), rel=1e-4), text
    assert on[FACT] == pytest.approx(off[FACT], rel=1e-4)
    # the answer gains on the other speaker's reply that shares the question's word ("research")
    answer, reply = CHAT[2], CHAT[3]
    assert on[answer] / on[reply] == pytest.approx(speakers.SPEAKER_FACTOR * off[answer] / off[reply], rel=1e-3)


def test_a_question_about_both_speakers_is_left_alone(chat) -> None:
    running, client = chat
    query = "What did Caroline and Melanie talk about at the support group?"
    off = _relevance(running, client, query, factor=1.0)
    on = _relevance(running, client, query, factor=speakers.SPEAKER_FACTOR)
    assert on == pytest.approx(off, rel=1e-4)


R = "acme/assistant-chat"
ROLES = [
    ("user", "I went to an LGBTQ support group yesterday and it was so powerful."),
    ("assistant", "That sounds powerful. Support groups can help a lot; research shows peer support reduces stress."),
    ("user", "Lately I have been looking into adoption agencies; having a family has been my dream."),
    ("assistant", "Doing research on adoption agencies and readying yourself emotionally makes sense."),
]


@pytest.fixture(scope="module")
def roles(chat):  # type: ignore[no-untyped-def]
    running, client = chat
    client.create_tenant(R)
    at = int(time.time() * 1000) - 86_400_000
    # As the SDK's write_conversation sends ("user", text) turns: "user: text", the previous turn as context.
    client.write(R, *conversation_inputs([{"speaker": s, "text": t, "created_at_ms": at + i * 1000}
                                          for i, (s, t) in enumerate(ROLES)], conversation_id="c1"))
    return running, client


def _role_relevance(running, client, query: str, *,  # type: ignore[no-untyped-def]
                   first_person: bool) -> dict[str, float]:
    return _relevance_with(client, R, query, speakers, "FIRST_PERSON", first_person)


def test_a_first_person_question_raises_the_users_turns(roles) -> None:
    running, client = roles
    assert speakers.FIRST_PERSON   # on by default
    query = "What did I research?"
    off = _role_relevance(running, client, query, first_person=False)
    on = _role_relevance(running, client, query, first_person=True)
    assert set(on) == set(off) == {f"{s}: {t}" for s, t in ROLES}
    for speaker, text in ROLES:
        said = f"{speaker}: {text}"
        want = min(off[said] * speakers.SPEAKER_FACTOR, speakers.MAX_RELEVANCE) if speaker == "user" else off[said]
        assert on[said] == pytest.approx(max(want, off[said]), rel=1e-4), said


def test_a_question_in_the_second_person_leaves_the_roles_alone(roles) -> None:
    running, client = roles
    query = "What did you say about my research?"
    off = _role_relevance(running, client, query, first_person=False)
    on = _role_relevance(running, client, query, first_person=True)
    assert on == pytest.approx(off, rel=1e-4)


def test_a_request_to_the_assistant_raises_the_users_turns(roles) -> None:
    running, client = roles
    query = "Can you help me find more on adoption agencies for my family?"   # "you": the one asked, not the topic
    off = _role_relevance(running, client, query, first_person=False)
    on = _role_relevance(running, client, query, first_person=True)
    raised = [said for said in on if on[said] > off[said] * 1.0001]
    assert raised and all(said.startswith("user: ") for said in raised), raised
    speakers.REQUESTS = False
    try:
        before = _role_relevance(running, client, query, first_person=True)
    finally:
        speakers.REQUESTS = True
    assert before == pytest.approx(off, rel=1e-4)   # before: any "you" left the roles alone


A = "acme/asking"
ASKING = [
    "Caroline: I went to a pottery class yesterday and made my first bowl.",
    "Melanie: That's awesome! What made you pick pottery?",
    "Caroline: My aunt taught me pottery when I was young, so it felt like home.",
    "Melanie: Did you keep the pottery bowl? 😊",
    "user: I picked pottery because my aunt taught me, what clay should I buy?",   # a request to an assistant
]


@pytest.fixture(scope="module")
def asking(chat):  # type: ignore[no-untyped-def]
    running, client = chat
    client.create_tenant(A)
    at = int(time.time() * 1000) - 86_400_000
    for i, text in enumerate(ASKING):
        client.write(A, pb.MemoryInput(content=text, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=at + i * 1000))
    return running, client


def test_a_turn_that_ends_by_asking_falls_by_the_factor(asking) -> None:
    running, client = asking
    pipeline = running.app.engine.search_pipeline
    assert pipeline.question_factor == speakers.QUESTION_FACTOR < 1   # on by default
    query = "Why did Caroline pick pottery?"
    off = _relevance_with(client, A, query, pipeline, "question_factor", 1.0)
    on = _relevance_with(client, A, query, pipeline, "question_factor", speakers.QUESTION_FACTOR)
    assert set(on) == set(off) == set(ASKING)
    for text in ASKING:
        asks = text.startswith("Melanie:")   # the user's request is a chat role's turn: left alone
        want = off[text] * speakers.QUESTION_FACTOR if asks else off[text]
        assert on[text] == pytest.approx(want, rel=1e-4), text
    # the answer now outranks the question it answers, which shares more of the query's words
    assert on[ASKING[2]] > on[ASKING[1]]
