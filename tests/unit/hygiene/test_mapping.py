from __future__ import annotations

from server.domain import (Consolidation, ConsolidationReport, Extraction, Memory, MemoryStatus, MemoryType,
                           QueryResult, Timings, WriteOutcome, WriteResult)
from server.grpc import mapping
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb


def test_hygiene_fields_cross_the_wire() -> None:
    m = Memory(memory_id="s", doc_id=1, content="x", type=MemoryType.SEMANTIC, importance=0.7, created_at_ms=1,
               last_access_at_ms=1, access_count=0, entities=(), source_ref="", scope="", confidence=1.0, key="",
               status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="", pinned=False, expires_at_ms=0, metadata={},
               source_refs=("a", "b"), updated_at_ms=1, salience=0.25, normalized="NFC", consolidates=("a", "b"))
    out = mapping.memory_to_pb(m)
    assert (round(out.salience, 4), out.normalized, list(out.consolidates), out.consolidated_into) == (
        0.25, "NFC", ["a", "b"], "")
    q = mapping.query_from_pb(pb.SearchQuery(text="hi", gate=True))
    assert q.gate is True
    assert mapping.query_result_to_pb(QueryResult(hits=(), timings=Timings(), skipped="small talk")).skipped == "small talk"


def test_write_reply_counts_skipped_and_reports_and_extractions_map() -> None:
    results = [WriteResult(memory_id="", outcome=WriteOutcome.SKIPPED, status=MemoryStatus.ACTIVE, salience=0.01),
               WriteResult(memory_id="m", outcome=WriteOutcome.CREATED, status=MemoryStatus.ACTIVE, salience=0.6)]
    reply = mapping.write_response_to_pb(results)
    assert reply.skipped == 1 and reply.results[0].outcome == spb.WRITE_OUTCOME_SKIPPED
    assert reply.results[0].status == pb.MEMORY_STATUS_UNSPECIFIED and reply.results[1].status == pb.MEMORY_STATUS_ACTIVE
    report = ConsolidationReport(clusters=(Consolidation(memory_id="s", members=("a", "b"), content="x"),), restored=2)
    c = mapping.consolidate_to_pb(report)
    assert (c.clusters, c.consolidated, c.restored, list(c.consolidations[0].consolidates)) == (1, 2, 2, ["a", "b"])
    e = mapping.extraction_to_pb(Extraction(memory_ids=("f",), facts=2, pending=1))
    assert (list(e.memory_ids), e.facts, e.pending) == (["f"], 2, 1)
