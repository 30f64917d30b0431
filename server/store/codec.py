"""Memory ↔ JSON for the write-ahead log. One function each way; field names are the log's format."""

from __future__ import annotations

from typing import Any

from server.domain import Memory, MemoryStatus, MemoryType


def memory_to_json(m: Memory) -> dict[str, Any]:
    return {
        "id": m.memory_id, "doc": m.doc_id, "content": m.content, "type": int(m.type),
        "importance": m.importance, "created": m.created_at_ms, "accessed": m.last_access_at_ms,
        "count": m.access_count, "entities": list(m.entities), "source_ref": m.source_ref,
        "scope": m.scope, "confidence": m.confidence, "key": m.key, "status": int(m.status),
        "supersedes": list(m.supersedes), "superseded_by": m.superseded_by, "pinned": m.pinned,
        "expires": m.expires_at_ms, "metadata": dict(m.metadata), "source_refs": list(m.source_refs),
        "updated": m.updated_at_ms, **({"context": m.context} if m.context else {}),
        **({"salience": m.salience} if m.salience else {}), **({"normalized": m.normalized} if m.normalized else {}),
        **({"consolidated_into": m.consolidated_into} if m.consolidated_into else {}),
        **({"consolidates": list(m.consolidates)} if m.consolidates else {}),
        **({"updates": list(m.updates)} if m.updates else {}), **({"updated_by": m.updated_by} if m.updated_by else {}),
    }


def memory_from_json(d: dict[str, Any]) -> Memory:
    return Memory(
        memory_id=d["id"], doc_id=int(d["doc"]), content=d["content"], type=MemoryType(d["type"]),
        importance=float(d["importance"]), created_at_ms=int(d["created"]),
        last_access_at_ms=int(d["accessed"]), access_count=int(d["count"]),
        entities=tuple(d["entities"]), source_ref=d["source_ref"], scope=d["scope"],
        confidence=float(d["confidence"]), key=d["key"], status=MemoryStatus(d["status"]),
        supersedes=tuple(d["supersedes"]), superseded_by=d["superseded_by"], pinned=bool(d["pinned"]),
        expires_at_ms=int(d["expires"]), metadata=dict(d["metadata"]),
        source_refs=tuple(d["source_refs"]), updated_at_ms=int(d["updated"]),
        context=d.get("context", ""), salience=float(d.get("salience", 0.0)), normalized=d.get("normalized", ""),
        consolidated_into=d.get("consolidated_into", ""), consolidates=tuple(d.get("consolidates", ())),
        updates=tuple(d.get("updates", ())), updated_by=d.get("updated_by", ""),
    )
