"""A tenant shard for engine unit tests: the real TenantShard (store, FAISS flat index, touches, audit, state)
over an in-memory lexical index instead of Lucene, so no JVM starts; and a settable clock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from server.config import MemoryConfig
from server.domain import MemoryInput, WriteResult
from server.engine.write import commit_writes
from server.index.tiered import TieredDenseIndex
from server.index.tiers import TierRules
from server.store.audit import AuditPolicy
from server.store.memory_store import TenantStore
from server.tenants.shard import TenantShard

DIM = 8
T0 = 1_767_225_600_000   # 2026-01-01 UTC
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


class MemoryLexical:
    """The part of LuceneIndex a shard writes to and the pipeline reads (token-overlap scores, best first)."""

    def __init__(self) -> None:
        self.docs: dict[int, str] = {}
        self.seq = 0

    def committed_seq(self) -> int:
        return self.seq

    def upsert(self, docs: Sequence[tuple[int, str]], refresh: bool = True) -> None:
        self.docs.update(docs)

    def delete(self, ids: Sequence[int], refresh: bool = True) -> None:
        for doc in ids:
            self.docs.pop(int(doc), None)

    def delete_all(self, refresh: bool = True) -> None:
        self.docs.clear()

    def refresh(self) -> None:
        return None

    def commit(self, seq: int) -> None:
        self.seq = seq

    def close(self) -> None:
        return None

    def search_many(self, texts: Sequence[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for text in texts:
            words = set(text.lower().split())
            scored = sorted(((len(words & set(t.lower().split())), d) for d, t in self.docs.items()), reverse=True)
            hits = [(s, d) for s, d in scored if s > 0][:k]
            out.append((np.asarray([s for s, _ in hits], dtype=np.float32), np.asarray([d for _, d in hits], dtype=np.int64)))
        return out


@dataclass
class Clock:
    """The engine's injected clock (ms since the epoch); tests move it."""

    now: int = T0

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def make_shard(directory: Path, tenant_id: str = "t") -> TenantShard:
    directory.mkdir(parents=True, exist_ok=True)
    store, _ = TenantStore.open(directory, dim=DIM)
    dense = TieredDenseIndex(DIM, rules=TierRules(), exact_source=store.exact_vectors)
    return TenantShard(tenant_id, directory, store, dense, MemoryLexical(),  # type: ignore[arg-type]
                       audit=AuditPolicy().open(directory))


def vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def write(shard: TenantShard, inputs: Sequence[MemoryInput], *, now_ms: int, seed: int = 0,
          cfg: MemoryConfig = MemoryConfig(dedupe_cosine=1.01)) -> list[WriteResult]:
    """Commits memories the way the write path does (one group; distinct random vectors: no merges)."""
    with shard.write_lock:
        return commit_writes(shard, inputs, vectors(len(inputs), seed), cfg=cfg, now_ms=now_ms)
