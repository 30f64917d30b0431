"""JSON ↔ domain for the console: generic replies, strict requests."""

from __future__ import annotations

import dataclasses
import math

import pytest

from server.console import codec
from server.domain import AuditOp, Breakdown, ForgetMode, Memory, MemoryStatus, MemoryType, QueryResult, Timings
from server.errors import InvalidArgument


def breakdown(**values: float) -> Breakdown:
    base = {f.name: 0 for f in dataclasses.fields(Breakdown)}
    base.update(values)
    return Breakdown(**base)  # type: ignore[arg-type]


def test_every_breakdown_field_is_sent_in_declared_order_and_non_finite_floats_become_null() -> None:
    out = codec.to_json(breakdown(final=0.5, rerank=math.nan, dense_rank=3))
    assert list(out) == [f.name for f in dataclasses.fields(Breakdown)] == codec.breakdown_fields()
    assert out["final"] == 0.5 and out["rerank"] is None and out["dense_rank"] == 3


def test_a_field_added_to_a_dataclass_reaches_the_json_without_a_change() -> None:
    @dataclasses.dataclass(frozen=True)
    class Later:
        relevance: float
        calibrated_probability: float
        status: MemoryStatus
        tags: frozenset[str]

    assert codec.to_json(Later(0.3, 0.9, MemoryStatus.PENDING, frozenset({"b", "a"}))) == {
        "relevance": 0.3, "calibrated_probability": 0.9, "status": "PENDING", "tags": ["a", "b"]}


def test_memories_and_results_keep_user_text_as_data() -> None:
    memory = Memory(memory_id="m1", doc_id=1, content="<script>x</script>", type=MemoryType.EPISODIC, importance=0.5,
                    created_at_ms=1, last_access_at_ms=2, access_count=0, entities=("a",), source_ref="s",
                    scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                    pinned=False, expires_at_ms=0, metadata={"k": "v"}, source_refs=("s",), updated_at_ms=3)
    out = codec.to_json(QueryResult(hits=(), timings=Timings(total_ns=5)))
    assert out["timings"]["total_ns"] == 5 and out["hits"] == []
    as_json = codec.to_json(memory)
    assert as_json["content"] == "<script>x</script>" and as_json["type"] == "EPISODIC"
    assert as_json["metadata"] == {"k": "v"} and as_json["entities"] == ["a"]


def test_filters_parse_names_and_reject_bad_values_by_field() -> None:
    f = codec.filter_from_json({"types": ["semantic", "EPISODIC"], "statuses": "pending", "entities": ["alice", ""],
                                "key": "city", "scope": "", "created_after_ms": "5", "min_importance": 0.5})
    assert f.types == {MemoryType.SEMANTIC, MemoryType.EPISODIC} and f.statuses == {MemoryStatus.PENDING}
    assert f.entities_any == {"alice"} and f.key == "city" and f.scope is None
    assert f.created_after_ms == 5 and f.min_importance == 0.5
    for bad, field in (({"types": ["nope"]}, "types"), ({"created_after_ms": "soon"}, "created_after_ms"),
                       ({"created_before_ms": -1}, "created_before_ms"), ({"entities": [1]}, "entities"),
                       ({"min_importance": "inf"}, "min_importance"), ({"key": 5}, "key")):
        with pytest.raises(InvalidArgument, match=field):
            codec.filter_from_json(bad)


def test_query_string_filters_and_the_playground_query() -> None:
    params = {"type": ["SEMANTIC"], "status": ["ACTIVE", "PENDING"], "entity": ["alice"], "key": ["city"]}
    f = codec.filter_from_json(codec.filter_from_params(params))
    assert f.types == {MemoryType.SEMANTIC} and len(f.statuses) == 2 and f.key == "city"
    q = codec.query_from_json({"text": "hi", "top_k": "5", "rerank_depth": -1, "as_of_ms": 1234,
                               "include_pending": True, "filter": {"types": ["procedural"]}})
    assert (q.text, q.top_k, q.rerank_depth, q.scoring.now_ms, q.include_pending) == ("hi", 5, -1, 1234, True)
    assert q.context_block and q.filter.types == {MemoryType.PROCEDURAL}
    with pytest.raises(InvalidArgument, match="top_k"):
        codec.query_from_json({"text": "hi", "top_k": 2.5})
    with pytest.raises(InvalidArgument, match="text"):
        codec.query_from_json({"text": None})
    with pytest.raises(InvalidArgument, match="include_pending"):
        codec.query_from_json({"text": "hi", "include_pending": "maybe"})


def test_forget_specs_ops_and_ids() -> None:
    spec = codec.forget_from_json({"mode": "delete", "older_than_ms": 10, "dry_run": True, "filter": {"key": "k"}})
    assert spec.mode == ForgetMode.DELETE and spec.older_than_ms == 10 and spec.dry_run and spec.filter.key == "k"
    assert codec.forget_from_json({}).mode == ForgetMode.ARCHIVE
    assert codec.audit_ops(["WRITE", "search"]) == {AuditOp.WRITE, AuditOp.SEARCH}
    assert codec.memory_ids({"ids": ["a", "b"]}) == ["a", "b"]
    with pytest.raises(InvalidArgument):
        codec.memory_ids({"ids": []})
    with pytest.raises(InvalidArgument, match="mode"):
        codec.forget_from_json({"mode": "shred"})
