"""What the cross-encoder reads of a long memory (server/engine/passages.py): its best passage for the query."""

from __future__ import annotations

import dataclasses

from server.domain import Memory, MemoryStatus, MemoryType
from server.engine import passages
from server.text import memory_text

FILLER = ("Here is a general overview of how to plan a week of meals, with some notes on shopping lists, "
          "batch cooking and storage times for the fridge and the freezer. ")


def memory(content: str, *, context: str = "") -> Memory:
    return Memory(memory_id="m_1", doc_id=1, content=content, type=MemoryType.EPISODIC, importance=0.5,
                  created_at_ms=1_683_504_000_000, last_access_at_ms=0, access_count=0, entities=(), source_ref="",
                  scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                  pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=0, context=context)


def test_a_short_memory_reads_as_before() -> None:
    m = memory("assistant: Caroline went to the LGBTQ support group on 7 May.", context="user: how was her week?")
    assert passages.rerank_text("when did caroline go to the support group?", m) == memory_text(m)


def test_evidence_deep_in_a_long_turn_is_what_the_cross_encoder_reads() -> None:
    evidence = "Your sister Caroline said the adoption agency approved her application in June."
    content = "assistant: " + FILLER * 8 + evidence + " " + FILLER * 6
    assert len(content) > 2 * passages.PASSAGE_CHARS
    text = passages.rerank_text("when was caroline's adoption application approved?", memory(content))
    assert evidence in text and text.startswith("[8 May 2023] ")
    assert len(text) <= passages.PASSAGE_CHARS + len("[8 May 2023] ")
    # no query word anywhere: the first window, as the first tokens were before
    assert passages.best_passage("zzz qqq", content) == passages.passages(content)[0]


def test_windows_overlap_cover_the_text_and_cut_at_spaces() -> None:
    text = " ".join(f"w{i:03d}" for i in range(400))     # 2,000 characters
    windows = passages.passages(text, size=400, stride=200)
    assert all(len(w) <= 400 for w in windows)
    assert all(not w.startswith(" ") and not w.endswith(" ") for w in windows)
    words = set(text.split())
    assert set(" ".join(windows).split()) == words and all(set(w.split()) <= words for w in windows)
    assert windows[0].split()[-1] in windows[1]             # consecutive windows overlap


def test_chinese_queries_match_character_pairs() -> None:
    content = "助手：" + "今天的天气预报说明天会下雨，请记得带伞。" * 30 + "你的妹妹小雨的钢琴考级定在下个月十五号。" + "天气很好。" * 40
    assert "钢琴考级" in passages.best_passage("小雨的钢琴考级是哪天？", content)


def test_a_later_window_is_read_only_when_it_clearly_holds_more_query_terms() -> None:
    first = "Vitamin D and bone density in older adults: a cohort study. "
    later = "In this cohort, vitamin D deficiency raises the fracture risk of older adults. "
    content = first + FILLER * 6 + later + FILLER * 4
    query = "vitamin D deficiency raises fracture risk in older adults"
    windows = passages.passages(content)
    hits = [len(passages.terms(query) & passages.terms(w)) for w in windows]
    assert hits[0] >= 1 and max(hits) > hits[0]
    margin = max(hits) - hits[0]
    assert passages.best_passage(query, content, margin=margin) != windows[0]     # clearly more: the later window
    assert passages.best_passage(query, content, margin=margin + 1) == windows[0]   # not clearly: the first
    assert passages.best_passage(query, content, margin=0) == passages.best_passage(query, content, margin=1)



def test_a_long_turn_reads_a_narrower_window_than_a_long_document() -> None:
    evidence = "Your sister Caroline said the adoption agency approved her application in June."
    content = "assistant: " + FILLER * 8 + evidence + " " + FILLER * 6
    query = "when was caroline's adoption application approved?"
    text = passages.rerank_text(query, memory(content))                  # a chat turn: TURN_WINDOW characters
    assert evidence in text and len(text) <= passages.TURN_WINDOW + len("[8 May 2023] ") < 500
    document = dataclasses.replace(memory(content), type=MemoryType.SEMANTIC)
    read = passages.rerank_text(query, document)                         # a document keeps PASSAGE_WINDOW (800)
    assert evidence in read and 600 < len(read) <= passages.PASSAGE_WINDOW
    assert len(passages.rerank_text(query, memory(content), window=600)) > 500
    short = memory("assistant: " + FILLER * 4)                            # under PASSAGE_CHARS: read whole
    assert passages.rerank_text(query, short) == memory_text(short)


def test_function_words_do_not_choose_the_window() -> None:
    # The talk around the answer says "what", "did", "the" more often than the answer's own window does; the window
    # is chosen by the question's other words. Every word of three letters or more chose the talk before.
    talk = "What did you think of the plan? What did they say about the idea, and what did the others do then? "
    evidence = "Caroline researched adoption agencies in May."
    content = "assistant: " + FILLER * 3 + evidence + " " + FILLER * 2 + talk * 3 + FILLER
    query = "What did Caroline research about adoption?"
    assert passages.terms(query) == {"caroline", "research", "adoption"}
    assert evidence in passages.rerank_text(query, memory(content))
    saved = passages.SKIP_FUNCTION_WORDS
    try:
        passages.SKIP_FUNCTION_WORDS = False
        assert evidence not in passages.rerank_text(query, memory(content))   # the rule before: the talk
    finally:
        passages.SKIP_FUNCTION_WORDS = saved
