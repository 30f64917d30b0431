"""The recency sets (benchmarks/quality/data/recency_*): each loads, every judged id is a memory of its set, and
no memory text is in two sets (a dev set must not hold the held-out set's statements)."""

from __future__ import annotations

import pytest

from benchmarks.quality.datasets import RECENCY_SETS, load_recency


@pytest.mark.parametrize("name", RECENCY_SETS)
def test_each_recency_set_judges_its_own_memories(name: str) -> None:
    rs = load_recency(name=name)
    ids = {m.id for m in rs.memories}
    assert len(ids) == len(rs.memories) and rs.queries
    for q in rs.queries:
        assert set(rs.qrels[q.id]) <= ids and set(rs.stale[q.id]) <= ids, q.id
        assert not set(rs.qrels[q.id]) & set(rs.stale[q.id]), q.id
        assert rs.kind[q.id] in {"newer", "recent", "importance", "past", "keep"} and rs.lang[q.id] in {"en", "zh"}


def test_no_memory_text_is_in_two_sets() -> None:
    seen: dict[str, str] = {}
    for name in RECENCY_SETS:
        for m in load_recency(name=name).memories:
            assert seen.setdefault(m.content, name) == name, (m.content, seen[m.content], name)


def test_an_unknown_set_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown recency set"):
        load_recency(name="recency_nope")
