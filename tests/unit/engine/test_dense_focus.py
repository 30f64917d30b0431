"""The cross-encoder's window of a long chat turn where its passage vector closest to the query lies
(server/engine/passages.py ``dense_focus``, ``focus_window``; the search pipeline's ``_focus``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from server.domain import Memory, MemoryStatus, MemoryType
from server.engine import passages as reads
from server.engine.passages import TURN_WINDOW, dense_focus, focus_window, rerank_text, rerank_texts, window_spans
from server.lexical.windows import passages

FILLER = "Here is a short overview before getting to the details of the plan. "
LINE = "Caroline: I finally signed up for the pottery class at the community centre."


@pytest.fixture(autouse=True)
def _window_reads(monkeypatch):  # type: ignore[no-untyped-def]
    """These tests read a long turn's TURN_WINDOW windows: the sentence reads (the default) are off here
    (tests/unit/engine/test_sentence_reads.py tests them)."""
    monkeypatch.setattr(reads, "TURN_SENTENCES", 0)


def turn() -> str:
    return "assistant: " + FILLER * 8 + LINE + " " + FILLER * 5


def memory(content: str, kind: MemoryType = MemoryType.EPISODIC) -> Memory:
    return Memory(memory_id="m_1", doc_id=1, content=content, type=kind, importance=0.5,
                  created_at_ms=1_683_504_000_000, last_access_at_ms=0, access_count=0, entities=(), source_ref="",
                  scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                  pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=0)


def test_window_spans_place_each_window_in_its_text() -> None:
    text = turn()
    windows = passages(text, size=TURN_WINDOW, stride=TURN_WINDOW // 2)
    for (a, b), window in zip(window_spans(text, windows), windows, strict=True):
        assert text[a:b] == window


def test_focus_picks_the_window_holding_the_span() -> None:
    text = turn()
    windows = passages(text, size=TURN_WINDOW, stride=TURN_WINDOW // 2)
    start = text.index(LINE)
    chosen = focus_window(text, windows, (start, start + len(LINE)))
    assert LINE in windows[chosen]
    assert focus_window(text, windows, (0, 10)) == 0


def test_dense_focus_is_the_span_of_the_closest_passage_in_content_coordinates() -> None:
    spans = [(30, 80), (60, 120), (100, 160)]
    vectors = np.eye(3, dtype=np.float32)
    assert dense_focus(spans, vectors, np.array([0.1, 0.2, 0.9], np.float32), content_start=20) == (80, 140)
    assert dense_focus(spans, vectors[:2], np.ones(3, np.float32), content_start=0) is None   # do not pair up
    assert dense_focus([], np.zeros((0, 3), np.float32), np.ones(3, np.float32), content_start=0) is None


def test_the_focus_decides_what_the_cross_encoder_reads_of_a_long_turn() -> None:
    m = memory(turn())
    start = m.content.index(LINE)
    query = "What class did Caroline sign up for?"
    focused = rerank_text(query, m, focus=(start, start + len(LINE)))
    assert LINE in focused
    assert rerank_texts(query, m, focus=(start, start + len(LINE))) == [focused]
    # A focus on the filler reads the filler, whatever the words say: the dense side decides where it is given.
    away = rerank_text(query, m, focus=(0, 40))
    assert LINE not in away and FILLER.strip() in away
    # Without a focus the words decide, as before.
    assert rerank_text(query, m) == rerank_text(query, m, focus=None)
    # A short memory reads whole, focus or not.
    short = dataclasses.replace(m, content=LINE)
    assert rerank_text(query, short, focus=(0, 5)) == rerank_text(query, short)
