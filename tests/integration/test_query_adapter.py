"""The query adapter through the real server (default embedder): the mapped vector chooses the dense list and its
order, each hit keeps its cosine with the query's own vector, and a server without the adapter reads as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import start_server

from engram_proto.v1 import messages_pb2 as pb
from server.engine.query_adapter import MATRIX, PROVENANCE

T = "acme/ada"
MEMORIES = ["I drive a blue 2019 Toyota Corolla.", "My sister lives in Lisbon and teaches maths.",
            "The quarterly report is due on Friday.", "I am allergic to peanuts."]
QUERY = "what car do I drive?"
TARGET = "The quarterly report is due on Friday."


@pytest.fixture(scope="module")
def servers(tmp_path_factory, jvm, embedder):  # type: ignore[no-untyped-def]
    q = embedder.embed([embedder.query_prefix + QUERY])[0]
    b = embedder.embed([embedder.passage_prefix + TARGET])[0]
    folder = tmp_path_factory.mktemp("adapter")
    np.save(folder / MATRIX, (8.0 * np.outer(q, b)).astype(np.float32))   # q -> q + 8 (q.q) b: towards TARGET
    (folder / PROVENANCE).write_text(json.dumps({"embedder": embedder.name}))
    running = {name: start_server(tmp_path_factory.mktemp(name) / "data", embedder=embedder,
                                  advanced={"query_adapter": path})
               for name, path in (("plain", ""), ("mapped", str(folder)))}
    clients = {}
    for name, server in running.items():
        clients[name] = server.client()
        clients[name].create_tenant(T)
        clients[name].write(T, *[pb.MemoryInput(content=c, type=pb.MEMORY_TYPE_SEMANTIC) for c in MEMORIES])
    yield clients
    for server in running.values():
        server.stop()


def test_the_mapped_vector_orders_the_dense_list_and_each_hit_keeps_its_own_cosine(  # type: ignore[no-untyped-def]
        servers) -> None:
    plain = {h.memory.content: h.breakdown for h in servers["plain"].search(T, QUERY, top_k=4, dense_only=True).hits}
    mapped = {h.memory.content: h.breakdown for h in servers["mapped"].search(T, QUERY, top_k=4, dense_only=True).hits}
    assert plain[MEMORIES[0]].dense_rank == 1 and plain[TARGET].dense_rank > 1    # the query's own vector: the car
    assert mapped[TARGET].dense_rank == 1                                         # the mapped one: the target
    for content, breakdown in mapped.items():   # each on the cosine scale of the query's own vector
        assert breakdown.dense_score == pytest.approx(plain[content].dense_score, abs=1e-4)
    assert mapped[TARGET].dense_score < mapped[MEMORIES[0]].dense_score


def test_a_chinese_query_is_centred_not_mapped(servers) -> None:  # type: ignore[no-untyped-def]
    question = "我开什么车？"
    ranks = [{h.memory.content: h.breakdown.dense_rank
              for h in servers[name].search(T, question, top_k=4, dense_only=True).hits}
             for name in ("plain", "mapped")]
    assert ranks[0] == ranks[1]
