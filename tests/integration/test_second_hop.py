"""The second hop through the real server (e5, FAISS, Lucene, the shipped cross-encoder): a question names what one turn
says and the answer is the turn after it; with the hop (the default) the answer reaches a share of its seed's
relevance, a confident first-round hit keeps its place, each memory comes back once, and a turn of another
conversation written in between is never pulled in."""

from __future__ import annotations

import time

import pytest
from support import start_server

from server.config import BUNDLED_RERANKER, bundled_reranker
from server.engine import expand
from engram_proto.v1 import messages_pb2 as pb

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

T = "acme/maya"
CHAT = [
    "Maya: Do you remember the violin competition in Vienna I told you about?",
    "Sam: Of course! How did it go in the end?",
    "Maya: I came second out of forty players, and the jury gave me a scholarship.",
    "Sam: That is wonderful, congratulations!",
    "Maya: Thanks. Next I want to learn to bake sourdough bread.",
]
OTHER = "Lee: the quarterly budget review moved to Friday"


@pytest.fixture(scope="module")
def maya(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path_factory.mktemp("hop") / "data", embedder=embedder, models={"reranker": "bundled"})
    client = running.client()
    client.create_tenant(T)
    at = int(time.time() * 1000) - 86_400_000
    for i, text in enumerate(CHAT):   # turn by turn, as a chat writes them; another conversation's turn in between
        client.write(T, pb.MemoryInput(content=text, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=at + i * 1000,
                                       scope="chat-1"))
        if i == 1:
            client.write(T, pb.MemoryInput(content=OTHER, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=at + 1500,
                                           scope="chat-2"))
    yield running, client
    running.stop()


def _search(running, client, *, turns: int):  # type: ignore[no-untyped-def]
    """The hits with the hop's ``turns``; the rule for turns that end by asking (which follows the hop, and two of
    these turns ask) is off in both, so the relevance compared is the hop's alone."""
    pipeline = running.app.engine.search_pipeline
    saved = pipeline.expand_turns, pipeline.question_factor
    pipeline.expand_turns, pipeline.question_factor = turns, 1.0
    try:
        return client.search(T, "how did the violin competition in Vienna go?", top_k=6,
                             scoring={"now_ms": int(time.time() * 1000)}).hits
    finally:
        pipeline.expand_turns, pipeline.question_factor = saved


def test_the_turns_beside_the_best_hits_reach_a_share_of_their_relevance(maya) -> None:
    running, client = maya
    assert running.app.engine.search_pipeline.expand_turns == 1          # on by default
    off = _search(running, client, turns=0)
    on = _search(running, client, turns=1)
    rel_off = {h.memory.content: h.breakdown.relevance for h in off}
    rel_on = {h.memory.content: h.breakdown.relevance for h in on}
    assert len({h.memory.memory_id for h in on}) == len(on)               # each memory once
    assert on[0].memory.content == off[0].memory.content                  # the first round's best keeps its place
    seeds = sorted(rel_off, key=rel_off.get, reverse=True)[:expand.EXPAND_SEEDS]
    assert all(s in CHAT for s in seeds)
    confident = [r for r in rel_off.values() if r >= expand.CONFIDENT]
    for seed in seeds:
        i = CHAT.index(seed)
        for j in (i - 1, i + 1):
            if 0 <= j < len(CHAT) and CHAT[j] not in seeds:
                reach = expand.HOP * rel_off[seed]
                if confident:
                    reach = min(reach, min(confident))
                assert rel_on[CHAT[j]] >= min(reach, rel_off.get(CHAT[j], 0.0)) - 1e-6
                assert rel_on[CHAT[j]] == pytest.approx(max(rel_off.get(CHAT[j], 0.0), reach), rel=1e-3)
                assert all(rel_on[CHAT[j]] < r for r in confident if r > reach)  # below every confident hit
    assert rel_on.get(OTHER, 0.0) == pytest.approx(rel_off.get(OTHER, 0.0), abs=1e-6)   # another scope: untouched
    assert CHAT[2] in [h.memory.content for h in on[:5]]                  # the answer is in what a block would hold
