"""Searchable by the next query: Lucene refreshes behind a Write's acknowledgement (server/tenants/lexical_slot.py),
and a search sent right after the acknowledgement still finds the new memory by a term only BM25 can match,
however late the refresher runs."""

from __future__ import annotations

import time

import pytest
from memory_support import write_one

from server.tenants.lexical_slot import LexicalSlot


@pytest.fixture
def late(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lucene's refresher starts 0.4 s late: what a search right after the acknowledgement finds, it found by
    waiting for the Write's lexical documents."""
    original = LexicalSlot._refresher

    def later(self: LexicalSlot) -> None:
        time.sleep(0.4)
        original(self)

    monkeypatch.setattr(LexicalSlot, "_refresher", later)


def test_a_search_right_after_the_acknowledgement_finds_the_write_by_bm25(server, admin, late) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant("acme/fresh")
    write_one(admin, "acme/fresh", "The team lunch moved to the Thai place on Friday")
    for i, word in enumerate(("zorbexite", "quillometer", "vandrisk")):
        mid = write_one(admin, "acme/fresh", f"Order {word} parts for the lab before the audit ({i})").memory_id
        hits = admin.search("acme/fresh", word, lexical_only=True).hits
        assert [h.memory.memory_id for h in hits] == [mid], f"the Write of {word!r} was not searchable at once"
