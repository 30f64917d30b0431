"""The windows of a long chat turn the cross-encoder reads (server/engine/passages.py ``rerank_texts``): every window
of a long EPISODIC memory up to ``reads`` (``TURN_READS``, 1 by default: the rule before), best_window's first; any
other memory reads one text as before."""

from __future__ import annotations

import dataclasses

import pytest

from server.domain import Memory, MemoryStatus, MemoryType
from server.engine import passages
from server.text import memory_text

TALK = ("What did not work last time is worth writing down before you plan the next one, and what did work "
        "deserves a note too. ")
EVIDENCE = "The grey cat we adopted last weekend is called Pepper."   # no word of the question
QUERY = "What did Maria name her kitten?"


@pytest.fixture(autouse=True)
def _window_reads(monkeypatch):  # type: ignore[no-untyped-def]
    """These tests read a long turn's TURN_WINDOW windows: the sentence reads (the default) are off here
    (tests/unit/engine/test_sentence_reads.py tests them)."""
    monkeypatch.setattr(passages, "TURN_SENTENCES", 0)


def memory(content: str, *, kind: MemoryType = MemoryType.EPISODIC) -> Memory:
    return Memory(memory_id="m_1", doc_id=1, content=content, type=kind, importance=0.5,
                  created_at_ms=1_683_504_000_000, last_access_at_ms=0, access_count=0, entities=(), source_ref="",
                  scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                  pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=0,
                  context="user: any news?")


def long_turn() -> str:
    return "assistant: " + TALK * 4 + "By the way, " + EVIDENCE + " " + TALK * 3


def test_the_window_holding_the_answer_is_read_where_it_shares_no_word_with_the_question() -> None:
    m = memory(long_turn())
    one = passages.rerank_text(QUERY, m)
    assert EVIDENCE not in one        # "what" and "did" lie in every window: best_window reads the first
    assert passages.rerank_texts(QUERY, m) == [one]                     # the default: one read
    texts = passages.rerank_texts(QUERY, m, reads=8)
    windows = passages.passages(m.content, size=passages.TURN_WINDOW, stride=passages.TURN_WINDOW // 2)
    assert texts[0] == one and len(texts) == min(len(windows), 8) > 1
    assert any(EVIDENCE in t for t in texts)
    # each read carries the header and the context one window's read carries
    assert all(t.startswith("[8 May 2023] ") and t.endswith("\ncontext: user: any news?") for t in texts)
    assert len(set(texts)) == len(texts)


def test_reads_are_capped_and_one_read_is_the_rule_before() -> None:
    m = memory(long_turn())
    assert passages.rerank_texts(QUERY, m, reads=1) == [passages.rerank_text(QUERY, m)]
    assert len(passages.rerank_texts(QUERY, m, reads=2)) == 2
    passages_context = passages.TURN_READ_CONTEXT
    try:
        passages.TURN_READ_CONTEXT = False
        assert all("context:" not in t for t in passages.rerank_texts(QUERY, m, reads=2))
    finally:
        passages.TURN_READ_CONTEXT = passages_context


def test_short_memories_and_long_documents_read_one_text() -> None:
    short = memory("assistant: " + TALK)
    assert passages.rerank_texts(QUERY, short, reads=8) == [memory_text(short)]
    document = memory(long_turn(), kind=MemoryType.SEMANTIC)
    assert passages.rerank_texts(QUERY, document, reads=8) == [passages.rerank_text(QUERY, document)]


def test_ranked_windows_put_best_window_first_then_the_most_query_terms() -> None:
    windows = ["nothing here", "maria and her kitten", "what did maria do", "kitten"]
    order = passages.ranked_windows("what did maria name her kitten", windows)
    assert order[0] == passages.best_window("what did maria name her kitten", windows)
    assert sorted(order) == list(range(len(windows)))
    hits = [len(passages.terms("what did maria name her kitten") & passages.terms(windows[i])) for i in order[1:]]
    assert hits == sorted(hits, reverse=True)


def test_a_memory_of_another_type_is_untouched() -> None:
    m = dataclasses.replace(memory(long_turn()), type=MemoryType.PROCEDURAL)
    assert len(passages.rerank_texts(QUERY, m, reads=8)) == 1
