"""Episodic → semantic consolidation. Episodic statements that say the same thing over time — cosine at least
``CONSOLIDATE_COSINE``, a shared name or number, written in different sessions (an hour or more apart), each
at most ``MAX_CHARS`` long — form a cluster; one SEMANTIC memory stands for it: content and context of the best
representative (highest salience, then the most central, then the newest; no model writes anything), ``source_refs`` and
``consolidates`` = the members, importance lifted by repetition, entities their union. The members stay
(they are history) with status CONSOLIDATED and ``consolidated_into``, so a search returns the one semantic
memory instead of four copies.

Idempotent (members are no longer ACTIVE episodic, so a second run finds nothing new), audited (one
CONSOLIDATE line per member naming the semantic memory) and undoable: delete the semantic memory and
:func:`restore_locked` (run after every Delete and at the start of every consolidation) makes its members
ACTIVE again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from server.domain import Memory, MemoryStatus, MemoryType
from server.groups import components

SESSION_GAP_MS = 3600 * 1000          # "over time": members at least this far apart
# Members are at least this similar (e5 cosine; with a shared name or number). On LoCoMo dev it makes 40 clusters of
# 104 turns, the duplicate share in the top 10 0.4% → 0.0%, recall@10 unchanged at 0.752 (benchmarks/hygiene/run.py)
CONSOLIDATE_COSINE = 0.96
# Members are statements or single turns: at most this many characters of content (every LoCoMo turn is, 444 at most,
# so the figures above hold). A longer text (a run of turns, a long answer) says several things, and e5 puts two such
# texts at 0.96 when they share a topic: over runs of consecutive LoCoMo turns past 900 characters (three dev
# conversations, no filler) the rule folded 15 runs, 10 of them sharing under half their words with the representative
# (a run holding "Lost my job as a banker yesterday" under one holding "I'm turning my loves of dance into a
# business"): a default search returns the representative's text alone
# (benchmarks/hygiene/long_consolidation.py; docs/concepts/hygiene.md).
MAX_CHARS = 500
NEIGHBOURS = 16
IMPORTANCE_PER_REPEAT = 0.1
_KEY = re.compile(r"\b[A-Z][a-z]{2,}\b|\d+")


def keys_of(m: Memory) -> frozenset[str]:
    """Names and numbers a memory mentions (past the speaker of a "<speaker>: text" turn) and its entities."""
    head, sep, rest = m.content.partition(": ")
    said = rest if sep and len(head) <= 40 else m.content
    return frozenset(k.lower() for k in _KEY.findall(said[1:])) | frozenset(e.lower() for e in m.entities)


@dataclass(frozen=True)
class Cluster:
    members: tuple[Memory, ...]       # oldest first
    representative: Memory


def candidates(memories: Sequence[Memory]) -> list[Memory]:
    """The memories consolidation may fold: active, unpinned EPISODIC statements of at most ``MAX_CHARS``."""
    return [m for m in memories if m.type == MemoryType.EPISODIC and m.status == MemoryStatus.ACTIVE
            and not m.consolidated_into and not m.pinned and len(m.content) <= MAX_CHARS]


def find_clusters(memories: Sequence[Memory], vectors: np.ndarray, *, cosine: float) -> list[Cluster]:
    """Pure: the clusters among ``memories`` (row i of ``vectors`` is memory i's unit vector)."""
    n = len(memories)
    if n < 2:
        return []
    sims = vectors @ vectors.T if n <= 4096 else None
    keys = [keys_of(m) for m in memories]

    def links() -> Iterator[tuple[int, int]]:
        for i in range(n):
            row = sims[i] if sims is not None else vectors @ vectors[i]
            near = np.argsort(-row)[:NEIGHBOURS + 1]
            for j in near.tolist():
                if j <= i or row[j] < cosine:
                    continue
                if abs(memories[i].created_at_ms - memories[j].created_at_ms) < SESSION_GAP_MS or not keys[i] & keys[j]:
                    continue
                yield i, j

    out = []
    for idx in components(n, links()):
        if len(idx) < 2:
            continue
        sub = vectors[idx] @ vectors[idx].T
        centrality = sub.sum(axis=1)
        best = max(range(len(idx)), key=lambda k: (memories[idx[k]].salience, round(float(centrality[k]), 4),
                                                    memories[idx[k]].created_at_ms, memories[idx[k]].memory_id))
        representative = memories[idx[best]]
        # No chains: a member says what the representative says (cosine to it), not only what a neighbour says.
        idx = [i for k, i in enumerate(idx) if k == best or sub[best, k] >= cosine]
        if len(idx) < 2:
            continue
        members = tuple(sorted((memories[i] for i in idx), key=lambda m: (m.created_at_ms, m.memory_id)))
        out.append(Cluster(members=members, representative=representative))
    return sorted(out, key=lambda c: c.members[0].created_at_ms)


def semantic_for(cluster: Cluster, *, memory_id: str, doc_id: int, now_ms: int) -> Memory:
    rep, members = cluster.representative, cluster.members
    entities = tuple(dict.fromkeys(e for m in members for e in m.entities))
    importance = min(1.0, max(m.importance for m in members) + IMPORTANCE_PER_REPEAT * (len(members) - 1))
    ids = tuple(m.memory_id for m in members)
    return Memory(
        memory_id=memory_id, doc_id=doc_id, content=rep.content, type=MemoryType.SEMANTIC, importance=importance,
        created_at_ms=max(m.created_at_ms for m in members), last_access_at_ms=max(m.last_access_at_ms for m in members),
        access_count=sum(m.access_count for m in members), entities=entities, source_ref=rep.source_ref,
        scope=rep.scope, confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
        pinned=False, expires_at_ms=0, metadata={"consolidated": str(len(members))}, source_refs=ids,
        updated_at_ms=now_ms, context=rep.context, salience=max(m.salience for m in members), consolidates=ids)


def mark_members(cluster: Cluster, semantic_id: str, *, now_ms: int) -> list[Memory]:
    return [dataclasses.replace(m, status=MemoryStatus.CONSOLIDATED, consolidated_into=semantic_id,
                                updated_at_ms=now_ms) for m in cluster.members]


def orphans(memories: Sequence[Memory], exists: set[str]) -> list[Memory]:
    """CONSOLIDATED memories whose semantic memory is gone, made ACTIVE again."""
    return [dataclasses.replace(m, status=MemoryStatus.ACTIVE, consolidated_into="")
            for m in memories if m.status == MemoryStatus.CONSOLIDATED and m.consolidated_into not in exists]
