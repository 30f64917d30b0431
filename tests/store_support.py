"""Stored memories for tests that write straight into a TenantStore (no server, no models)."""

from __future__ import annotations

import numpy as np

from server.domain import Memory, MemoryStatus, MemoryType
from server.store.memory_store import TenantStore


def stored(i: int, content: str, *, created: int, type: MemoryType = MemoryType.EPISODIC,  # noqa: A002
           scope: str = "", key: str = "", status: MemoryStatus = MemoryStatus.ACTIVE) -> Memory:
    """Memory ``m_{i:04d}`` (doc id ``i``) as the store holds it, created and last used at ``created``."""
    return Memory(memory_id=f"m_{i:04d}", doc_id=i, content=content, type=type, importance=0.5, created_at_ms=created,
                  last_access_at_ms=created, access_count=0, entities=(), source_ref="", scope=scope, confidence=1.0,
                  key=key, status=status, supersedes=(), superseded_by="", pinned=False, expires_at_ms=0, metadata={},
                  source_refs=(), updated_at_ms=created)


def put(store: TenantStore, *memories: Memory, dim: int) -> None:
    """Commits ``memories`` with a constant vector each."""
    store.commit(puts=[(m, np.ones(dim, dtype=np.float32)) for m in memories])
