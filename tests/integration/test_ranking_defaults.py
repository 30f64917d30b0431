"""The default ranking through the real server with the shipped cross-encoder: relevance first, recency and
importance bounded, the context block honours relevance, only used memories count as accesses.

The tenant is the README's quick-start session (issue: "Ranking that holds at the defaults")."""

from __future__ import annotations

import time

import pytest
from support import start_server

from server.config import BUNDLED_RERANKER, bundled_reranker
from engram_proto.v1 import messages_pb2 as pb
from server.engine.ranking import RECENCY_WEIGHT

pytestmark = pytest.mark.skipif(not bundled_reranker(), reason=f"{BUNDLED_RERANKER} absent (make reranker)")

T = "acme/alice"
DAY_MS = 86_400_000
ALLERGY = "Alice is allergic to peanuts"
LISBON = "Alice moved to Lisbon in March 2026 and works remotely"
BUDGET_OLD = "Alice budget for the trip is 3000 EUR"
BUDGET = "Alice budget for the trip is now 4500 EUR"


@pytest.fixture(scope="module")
def alice(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path_factory.mktemp("ranking") / "data", embedder=embedder,
                           models={"reranker": "bundled"})
    client = running.client()
    client.create_tenant(T)
    now = int(time.time() * 1000)
    client.write(T, pb.MemoryInput(content=ALLERGY, type=pb.MEMORY_TYPE_SEMANTIC, importance=0.9, pinned=True,
                                   entities=["alice"]),
                 pb.MemoryInput(content=LISBON, type=pb.MEMORY_TYPE_EPISODIC, created_at_ms=now - 365 * DAY_MS,
                                source_ref="chat-12#4"),
                 pb.MemoryInput(content="Alice prefers short answers with bullet points", type=pb.MEMORY_TYPE_SEMANTIC),
                 pb.MemoryInput(content=BUDGET_OLD, key="budget", scope="trip", created_at_ms=now - 30 * DAY_MS),
                 pb.MemoryInput(content=BUDGET, key="budget", scope="trip-2"),
                 pb.MemoryInput(content="爱丽丝喜欢喝乌龙茶", type=pb.MEMORY_TYPE_SEMANTIC))
    yield running, client
    running.stop()


def test_the_budget_question_puts_the_budget_first_not_the_pinned_allergy(alice) -> None:
    _, client = alice
    hits = client.search(T, "what is alice's budget?", top_k=3).hits
    assert {h.memory.content for h in hits[:2]} == {BUDGET, BUDGET_OLD}   # both scopes' budgets, then the rest
    allergy = [h for h in hits if h.memory.content == ALLERGY]
    assert not allergy or allergy[0].breakdown.final < 0.5 * hits[1].breakdown.final


def test_where_does_alice_live_finds_the_year_old_lisbon_memory_first(alice) -> None:
    """The issue's second example: a year unused no longer decays the Lisbon memory away (the plain curve gave
    it ~0); it keeps (1 - a) of its relevance, and its relevance is the highest (the calibration reads how far
    each cosine lies behind the query's best: the dense list puts Lisbon first), although BM25 matches only
    "alice" and engram-reranker-v1 scores the allergy higher. With a = b = 0.3 a relevance twice another's can
    never be overturned by age and importance ((1 - a)(1 - b) >= 1/2), so Lisbon (relevance ~1.8× the pinned
    allergy's) ranks first (at a = b = 0.5 it ranked second: README "Ranking")."""
    _, client = alice
    hits = client.search(T, "where does alice live", top_k=6).hits
    assert hits[0].memory.content == LISBON
    b = hits[0].breakdown
    assert b.dense_rank == 1                              # the embedder finds it first
    assert b.relevance == max(h.breakdown.relevance for h in hits)
    assert b.decay < 0.01 and b.recency >= 1 - RECENCY_WEIGHT - 1e-3   # a year unused: decay ~0, the factor bounded
    assert b.final == pytest.approx(b.relevance * b.recency * b.importance_weight * b.temporal, rel=1e-4)
    curve = client.search(T, "where does alice live", top_k=6, scoring=pb.Scoring(recency_weight=1.0)).hits
    old = next(h for h in curve if h.memory.content == LISBON).breakdown
    assert old.final < 0.01 * b.final                     # the original curve: what the default replaced


def test_relevance_is_a_probability_that_separates_answers_from_the_rest(alice) -> None:
    _, client = alice
    hits = client.search(T, "does alice have any food allergy?", top_k=6).hits
    assert hits[0].memory.content == ALLERGY
    assert 0.0 < hits[-1].breakdown.relevance < hits[0].breakdown.relevance <= 1.0
    assert hits[0].breakdown.relevance > 3 * max(h.breakdown.relevance for h in hits[1:])


def test_the_context_block_leaves_out_what_is_not_relevant(alice) -> None:
    _, client = alice
    result = client.search(T, "what kind of tea do I like to drink in the evening?", top_k=5, context_block=True)
    assert ALLERGY not in result.context_block
    assert all(h.breakdown.relevance < 0.02 for h in result.hits if h.memory.content == ALLERGY)  # the floor
    everything = client.search(T, "what kind of tea do I like to drink in the evening?", top_k=6,
                               context_block=True, context_items=6, min_relevance=0.0)
    assert ALLERGY in everything.context_block                 # an explicit floor of 0 keeps every hit (all six)


def test_a_live_search_counts_only_its_first_hits_as_used(alice) -> None:
    running, client = alice
    client.create_tenant("acme/used")
    client.write("acme/used", *[f"Note {i}: Carol's trip to city number {i}" for i in range(6)])
    hits = client.search("acme/used", "carol trip city", top_k=6).hits
    running.app.engine.flush()
    counts = [client.get("acme/used", h.memory.memory_id).memories[0].access_count for h in hits]
    assert len(counts) == 6 and counts[:3] == [1, 1, 1] and counts[3:] == [0, 0, 0]
