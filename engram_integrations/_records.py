"""Memories and hits as plain JSON-ready dicts: what the MCP tools answer and what the framework
integrations put into document metadata. Built from the SDK's reply messages only."""

from __future__ import annotations

import time
from typing import Any

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb


def now_ms() -> int:
    return int(time.time() * 1000)


def enum_name(enum: Any, value: int, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix).lower()


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000)) if ms else ""


def memory_view(m: pb.Memory, *, at_ms: int) -> dict[str, Any]:
    """Always: id, content, type, status, importance, created_at and age; the other fields when set."""
    out: dict[str, Any] = {
        "memory_id": m.memory_id, "content": m.content,
        "type": enum_name(pb.MemoryType, m.type, "MEMORY_TYPE_"),
        "status": enum_name(pb.MemoryStatus, m.status, "MEMORY_STATUS_"),
        "importance": round(float(m.importance), 4), "created_at": iso(m.created_at_ms),
        "age_s": max(0, (at_ms - m.created_at_ms) // 1000) if m.created_at_ms else 0,
    }
    optional: dict[str, Any] = {
        "entities": list(m.entities), "source_ref": m.source_ref, "source_refs": list(m.source_refs),
        "key": m.key, "scope": m.scope, "pinned": m.pinned, "expires_at": iso(m.expires_at_ms),
        "supersedes": list(m.supersedes), "superseded_by": m.superseded_by,
        "access_count": m.access_count, "metadata": dict(m.metadata),
        "salience": round(float(m.salience), 4), "consolidated_into": m.consolidated_into,
        "consolidates": list(m.consolidates), "normalized": m.normalized,
    }
    if m.confidence < 1.0:
        optional["confidence"] = round(float(m.confidence), 4)
    if m.last_access_at_ms and m.last_access_at_ms != m.created_at_ms:
        optional["last_access_at"] = iso(m.last_access_at_ms)
    if optional["source_refs"] == [m.source_ref]:
        del optional["source_refs"]
    out.update({k: v for k, v in optional.items() if v})
    return out


def breakdown_view(b: pb.ScoreBreakdown) -> dict[str, Any]:
    """How the score was made: each list's rank and score (0: not in that list), the fusion, the
    cross-encoder logit when reranked, and what decay and importance multiplied."""
    out: dict[str, Any] = {
        "final": round(float(b.final), 6), "relevance": round(float(b.relevance), 6),
        "dense_rank": b.dense_rank, "dense_score": round(float(b.dense_score), 6),
        "bm25_rank": b.bm25_rank, "bm25_score": round(float(b.bm25_score), 6), "rrf": round(float(b.rrf), 6),
        "decay": round(float(b.decay), 6), "importance_weight": round(float(b.importance_weight), 6),
    }
    if b.HasField("rerank"):
        out["rerank"] = round(float(b.rerank), 6)
    return out


def hit_view(hit: pb.Hit, *, at_ms: int) -> dict[str, Any]:
    return {**memory_view(hit.memory, at_ms=at_ms), "score": round(float(hit.breakdown.final), 6),
            "breakdown": breakdown_view(hit.breakdown)}


def write_view(result: spb.WriteResult) -> dict[str, Any]:
    out: dict[str, Any] = {"memory_id": result.memory_id,
                           "outcome": enum_name(spb.WriteOutcome, result.outcome, "WRITE_OUTCOME_"),
                           "status": enum_name(pb.MemoryStatus, result.status, "MEMORY_STATUS_")}
    if result.merged_into:
        out["merged_into"] = result.merged_into
    if result.salience:
        out["salience"] = round(float(result.salience), 4)
    if result.superseded:
        out["superseded"] = list(result.superseded)
    return out
