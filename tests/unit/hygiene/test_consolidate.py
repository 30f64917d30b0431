from __future__ import annotations

import dataclasses

import numpy as np

from server.domain import Memory, MemoryStatus, MemoryType
from server.hygiene.consolidate import (candidates, find_clusters, keys_of, mark_members, orphans, semantic_for)

DAY_MS = 86_400_000


def mem(i: int, content: str, *, day: int, salience: float = 0.3, importance: float = 0.5) -> Memory:
    return Memory(memory_id=f"m{i}", doc_id=i, content=content, type=MemoryType.EPISODIC, importance=importance,
                  created_at_ms=day * DAY_MS, last_access_at_ms=day * DAY_MS, access_count=0, entities=(),
                  source_ref=f"D{day}:{i}", scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(),
                  superseded_by="", pinned=False, expires_at_ms=0, metadata={}, source_refs=(f"D{day}:{i}",),
                  updated_at_ms=0, salience=salience)


def unit(*v: float) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_repeats_across_sessions_with_a_shared_name_cluster() -> None:
    ms = [mem(0, "Caroline: I love hiking with Max", day=1),
          mem(1, "Caroline: I really love hiking with Max", day=5, salience=0.6),
          mem(2, "Caroline: I love hiking with Max!", day=5),            # same session as m1, but m0 links both
          mem(3, "Caroline: I love hiking", day=9),                       # similar, no shared name or number
          mem(4, "Mel: the weather is nice", day=9)]
    vecs = np.stack([unit(1, 0.01, 0), unit(1, 0.02, 0), unit(1, 0.015, 0), unit(1, 0.0, 0.01), unit(0, 1, 0)])
    clusters = find_clusters(ms, vecs, cosine=0.95)
    assert len(clusters) == 1
    c = clusters[0]
    assert [m.memory_id for m in c.members] == ["m0", "m1", "m2"] and c.representative.memory_id == "m1"
    assert keys_of(ms[3]) == frozenset()


def test_same_session_near_copies_do_not_cluster() -> None:
    ms = [mem(0, "Caroline: Max is 3", day=1), mem(1, "Caroline: Max is 3!", day=1)]
    assert find_clusters(ms, np.stack([unit(1, 0), unit(1, 0.01)]), cosine=0.9) == []


def test_semantic_memory_stands_for_members_and_orphans_come_back() -> None:
    ms = [mem(0, "Caroline: I love Max", day=1, importance=0.4), mem(1, "Caroline: I love Max so much", day=3,
                                                                      salience=0.9, importance=0.6)]
    [c] = find_clusters(ms, np.stack([unit(1, 0), unit(1, 0.01)]), cosine=0.95)
    s = semantic_for(c, memory_id="s", doc_id=9, now_ms=5)
    assert (s.type, s.content, s.consolidates, s.source_refs) == (MemoryType.SEMANTIC, ms[1].content, ("m0", "m1"),
                                                                  ("m0", "m1"))
    assert abs(s.importance - 0.7) < 1e-9 and s.created_at_ms == 3 * DAY_MS and s.salience == 0.9
    marked = mark_members(c, "s", now_ms=5)
    assert {(m.status, m.consolidated_into) for m in marked} == {(MemoryStatus.CONSOLIDATED, "s")}
    assert candidates(marked) == []                              # idempotent: nothing left to consolidate
    assert orphans(marked, {"s", "m0", "m1"}) == []
    back = orphans(marked, {"m0", "m1"})
    assert [(m.status, m.consolidated_into) for m in back] == [(MemoryStatus.ACTIVE, "")] * 2
    assert candidates([dataclasses.replace(ms[0], pinned=True)]) == []


def test_only_statements_up_to_the_limit_are_candidates() -> None:
    from server.hygiene.consolidate import MAX_CHARS

    short = mem(0, "Caroline: I love hiking with Max", day=1)
    at_limit = mem(1, "x" * MAX_CHARS, day=2)
    past = mem(2, "Caroline: " + "we walked Max on the beach again. " * 20, day=3)
    assert len(past.content) > MAX_CHARS
    assert candidates([short, at_limit, past]) == [short, at_limit]
