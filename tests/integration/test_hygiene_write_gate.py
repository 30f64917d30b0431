"""Salience on write and the recall gate, through the real server."""

from __future__ import annotations

import time
from pathlib import Path

from support import start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

FACT = "Caroline: I moved to Lisbon in March 2023 with my two dogs"


def test_salience_sets_the_default_importance_and_min_salience_skips(tmp_path: Path, jvm: None, embedder) -> None:  # type: ignore[no-untyped-def]
    running = start_server(tmp_path / "data", embedder=embedder, memory={"min_salience": 0.05})
    try:
        c = running.client()
        c.create_tenant("t")
        reply = c.write("t", "Caroline: Thanks!", FACT, pb.MemoryInput(content="Bye!", importance=0.9))
        outcomes = [r.outcome for r in reply.results]
        assert outcomes == [spb.WRITE_OUTCOME_SKIPPED, spb.WRITE_OUTCOME_CREATED, spb.WRITE_OUTCOME_CREATED]
        assert reply.skipped == 1 and reply.results[0].memory_id == "" and reply.results[0].salience < 0.05
        got = c.memory.Get(spb.GetRequest(tenant_id="t", memory_ids=[r.memory_id for r in reply.results[1:]]),
                           metadata=c.metadata).memories
        fact, bye = got
        assert fact.salience == reply.results[1].salience > 0.5
        assert fact.importance > 0.5 and abs(fact.importance - (0.5 + 0.4 * (fact.salience - 0.5))) < 1e-6
        assert abs(bye.importance - 0.9) < 1e-6 and bye.salience < 0.05     # asked for explicitly: kept
        listed = c.memory.List(spb.ListRequest(tenant_id="t"), metadata=c.metadata).memories
        assert sorted(m.content for m in listed) == sorted([FACT, "Bye!"])
    finally:
        running.stop()


def test_recall_gate_skips_small_talk_and_recalls_back_references(server) -> None:  # type: ignore[no-untyped-def]
    c = server.client()
    c.create_tenant("g")
    c.write("g", FACT, "Melanie: the pottery project is due on Friday", type=pb.MEMORY_TYPE_EPISODIC)
    started = time.perf_counter()
    small = c.search("g", "Thanks so much, bye!", gate=True)
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert small.skipped == "small talk" and list(small.hits) == [] and elapsed_ms < 200
    assert small.timings.total_ns < 20_000_000
    ungated = c.search("g", "Thanks so much, bye!")
    assert ungated.skipped == "" and len(ungated.hits) > 0          # without gate it searches as before
    back = c.search("g", "what did we say last time?", gate=True)
    assert back.skipped == "" and len(back.hits) > 0
    zh = c.search("g", "上次说的那个项目", gate=True)
    assert zh.skipped == "" and len(zh.hits) > 0
    assert c.search("g", "cheers!", gate=True).skipped == "small talk"     # no memory names it yet
    c.write("g", "Melanie: The Cheers project is due on Friday", type=pb.MEMORY_TYPE_EPISODIC)
    server.app.engine.recall_gate.names.max_age_s = 0.0
    named = c.search("g", "cheers!", gate=True)       # "cheers" is small talk, but this tenant knows the name
    assert named.skipped == "" and named.hits[0].memory.content.startswith("Melanie")
    reply = c.memory.Search(spb.SearchRequest(tenant_id="g", queries=[
        pb.SearchQuery(text="hi!", gate=True), pb.SearchQuery(text="Where does Caroline live?", gate=True)]),
        metadata=c.metadata)
    assert [r.skipped for r in reply.results] == ["small talk", ""]
    assert reply.results[1].hits[0].memory.content == FACT
