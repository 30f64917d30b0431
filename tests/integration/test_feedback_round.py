"""The second retrieval round (search.feedback_docs) through the real server: a weak query's Rocchio step
reaches a memory that neither first-round list held; without it, the same search cannot. A query may also ask
for the round or refuse it (``SearchQuery.feedback``)."""

from __future__ import annotations

import pytest
from support import start_server

from engram_proto.v1 import messages_pb2 as pb

T = "fb"
TOP = "Caroline adopted a rescue greyhound called Biscuit from the shelter on Elm Street"
NEIGHBOUR = "Biscuit the greyhound sleeps on the sofa all day and hates the rain"
OTHERS = ["Caroline's favourite dish is a spicy lentil soup", "Caroline is taking a pottery class on Tuesdays",
          "Caroline painted her kitchen yellow last spring", "Caroline wants to visit Japan next year",
          "The shelter on Elm Street needs volunteers on weekends"]
QUERY = "which dog did Caroline adopt?"


def _server(tmp_path_factory, embedder, name: str, *, below: float | None = None,  # type: ignore[no-untyped-def]
            weight: float | None = None, **search):
    running = start_server(tmp_path_factory.mktemp(name) / "data", embedder=embedder,
                           search={"candidates": 2, **search})
    pipeline = running.app.engine.search_pipeline   # the rule's threshold and step are constants of the pipeline
    if below is not None:
        pipeline.feedback_below = below
    if weight is not None:
        pipeline.feedback_weight = weight
    client = running.client()
    client.create_tenant(T)
    client.write(T, *[pb.MemoryInput(content=c) for c in [TOP, NEIGHBOUR, *OTHERS]])
    return running, client


@pytest.fixture(scope="module")
def servers(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    # "off": the rule never fires (no first round is below 0), so only a query asking for the round runs it
    off = _server(tmp_path_factory, embedder, "off", feedback_docs=1, weight=1.0, below=0.0)
    on = _server(tmp_path_factory, embedder, "on", feedback_docs=1, weight=1.0, below=1.0)
    yield off[1], on[1]
    off[0].stop()
    on[0].stop()


def test_the_second_round_reaches_the_top_hits_neighbour(servers) -> None:  # type: ignore[no-untyped-def]
    off, on = servers
    first = off.search(T, QUERY, top_k=10).hits
    assert first[0].memory.content == TOP
    assert NEIGHBOUR not in {h.memory.content for h in first}   # two candidates per list: out of reach
    second = on.search(T, QUERY, top_k=10).hits
    found = {h.memory.content: h.breakdown for h in second}
    assert second[0].memory.content == TOP
    assert NEIGHBOUR in found
    assert found[NEIGHBOUR].dense_rank == 0 and found[NEIGHBOUR].bm25_rank == 0   # only the second round had it


def test_off_by_default(tmp_path_factory, jvm, embedder) -> None:  # type: ignore[no-untyped-def]
    running, client = _server(tmp_path_factory, embedder, "default")
    try:
        assert NEIGHBOUR not in {h.memory.content for h in client.search(T, QUERY, top_k=10).hits}
    finally:
        running.stop()


def test_a_query_can_ask_for_the_second_round_or_refuse_it(servers) -> None:  # type: ignore[no-untyped-def]
    off, on = servers
    asked = {h.memory.content for h in off.search(T, QUERY, top_k=10, feedback=True).hits}
    assert NEIGHBOUR in asked                      # the server's rule is off; the query asks for it
    refused = {h.memory.content for h in on.search(T, QUERY, top_k=10, feedback=False).hits}
    assert NEIGHBOUR not in refused                # the server's rule would run it; the query says no
