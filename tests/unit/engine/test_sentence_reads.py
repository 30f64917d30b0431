"""The sentence units of a long chat turn the cross-encoder reads (server/engine/passages.py ``sentence_units``,
``rerank_texts`` with ``TURN_SENTENCES``): short units that hold a line with little talk around it, the one the
query's words pick first, or the one at the passage vector closest to the query; any other memory reads as before."""

from __future__ import annotations

import dataclasses

import pytest

from server.domain import Memory, MemoryStatus, MemoryType
from server.engine import passages
from server.text import memory_text

TALK = ("What did not work last time is worth writing down before you plan the next one. "
        "What did work deserves a note too. ")
EVIDENCE = "The grey cat we adopted last weekend is called Pepper."   # no content word of the question
QUERY = "What did Maria name her kitten?"


def memory(content: str, *, kind: MemoryType = MemoryType.EPISODIC, context: str = "user: any news?") -> Memory:
    return Memory(memory_id="m_1", doc_id=1, content=content, type=kind, importance=0.5,
                  created_at_ms=1_683_504_000_000, last_access_at_ms=0, access_count=0, entities=(), source_ref="",
                  scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                  pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=0, context=context)


def long_turn() -> str:
    return "assistant: " + TALK * 4 + "By the way, Maria says: " + EVIDENCE + " " + TALK * 3


def test_units_start_at_each_sentence_and_stay_within_the_size() -> None:
    text = long_turn()
    units = passages.sentence_units(text, 200)
    assert all(len(u) <= 200 for u in units)
    assert any(u.startswith("By the way, Maria says: ") for u in units)
    assert any(EVIDENCE in u and len(u) < len(EVIDENCE) + 150 for u in units)
    # every sentence of the text lies whole in some unit, and no unit is a copy of its neighbour's tail
    for sentence in ("By the way, Maria says: " + EVIDENCE, "What did work deserves a note too."):
        assert any(sentence in u for u in units)
    assert all(units[i] not in units[i - 1] for i in range(1, len(units)))


def test_a_sentence_longer_than_a_unit_is_cut_at_spaces_and_short_text_is_one_unit() -> None:
    words = " ".join(f"w{i:03d}" for i in range(100))   # one 499-character sentence
    units = passages.sentence_units(words, 120)
    assert len(units) > 1 and all(len(u) <= 120 for u in units)
    assert all(not u.startswith(" ") and not u.endswith(" ") for u in units)
    assert passages.sentence_units("Just one line", 200) == ["Just one line"]
    assert passages.sentence_units("", 200) == [""]


def test_chinese_sentences_end_at_their_own_stops_and_join_without_spaces() -> None:
    units = passages.sentence_units("我去黄山爬山了。风景很好！你呢？", 10)
    assert units == ["我去黄山爬山了。", "风景很好！你呢？"]


def test_sentence_reads_are_short_texts_with_the_answer_among_them(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert passages.TURN_SENTENCES == 3 and not passages.SENTENCE_CONTEXT   # the defaults (chosen on dev data)
    m = memory(long_turn())
    texts = passages.rerank_texts(QUERY, m)
    assert len(texts) == 3 and len(set(texts)) == 3
    # each read: the header and the unit, without the memory's context (SENTENCE_CONTEXT, off by default)
    assert all(t.startswith("[8 May 2023] ") and "context:" not in t for t in texts)
    assert any(EVIDENCE in t for t in texts)          # "Maria" picks the unit that holds the answer
    assert all(len(t) < passages.TURN_WINDOW for t in texts)
    monkeypatch.setattr(passages, "SENTENCE_CONTEXT", True)
    assert all(t.endswith("\ncontext: user: any news?") for t in passages.rerank_texts(QUERY, m))
    monkeypatch.setattr(passages, "TURN_SENTENCES", -1)
    assert len(passages.rerank_texts(QUERY, m)) == len(passages.sentence_units(m.content))


def test_the_unit_at_the_closest_passage_vector_is_read_first(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(passages, "TURN_SENTENCES", 2)
    m = memory(long_turn())
    start = m.content.index(EVIDENCE)
    texts = passages.rerank_texts("zzz qqq", m, focus=(start, start + len(EVIDENCE)))
    assert EVIDENCE in texts[0]
    without = passages.rerank_texts("zzz qqq", m)   # no query word anywhere and no focus: the first unit
    assert without[0].startswith("[8 May 2023] assistant: ")


def test_short_memories_documents_and_the_rule_off_read_as_before(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(passages, "TURN_SENTENCES", 3)
    short = memory("assistant: " + TALK)
    assert passages.rerank_texts(QUERY, short) == [memory_text(short)]
    document = memory(long_turn(), kind=MemoryType.SEMANTIC)
    assert passages.rerank_texts(QUERY, document) == [passages.rerank_text(QUERY, document)]
    procedure = dataclasses.replace(memory(long_turn()), type=MemoryType.PROCEDURAL)
    assert len(passages.rerank_texts(QUERY, procedure)) == 1
    monkeypatch.setattr(passages, "TURN_SENTENCES", 0)
    m = memory(long_turn())
    assert passages.rerank_texts(QUERY, m, reads=1) == [passages.rerank_text(QUERY, m)]


@pytest.mark.parametrize("size", [60, 200, 400])
def test_units_cover_the_whole_text(size: int) -> None:
    text = long_turn()
    units = passages.sentence_units(text, size)
    covered = " ".join(units)
    assert all(word in covered for word in text.split())


def test_a_turn_of_too_many_units_reads_its_window_as_before() -> None:
    tiny = "Ok. " * 400 + "By the way, Maria says: " + EVIDENCE + " " + "Sure. " * 400   # ~4 KB of tiny sentences
    assert passages.sentence_units(tiny, limit=passages.MAX_UNITS) == []
    assert len(passages.sentence_units(tiny)) > passages.MAX_UNITS
    m = memory(tiny)
    assert passages.rerank_texts(QUERY, m) == [passages.rerank_text(QUERY, m)]
    huge = "word " * 3000                                             # longer than MAX_UNITS units could cover
    assert passages.sentence_units(huge, limit=passages.MAX_UNITS) == []
    assert passages.sentence_units(long_turn(), limit=passages.MAX_UNITS) == passages.sentence_units(long_turn())


def test_a_turns_units_are_read_once_and_every_caller_gets_its_own_list() -> None:
    # The rerank cost model and the rerank stage read the same candidates, and a candidate comes back for many
    # queries: its units and each unit's words are computed once, and a caller that changes its list changes nothing.
    text = long_turn()
    passages.sentence_units(text, limit=passages.MAX_UNITS)
    hits = passages._units.cache_info().hits
    units = passages.sentence_units(text, limit=passages.MAX_UNITS)
    assert passages._units.cache_info().hits == hits + 1
    units.clear()
    assert passages.sentence_units(text, limit=passages.MAX_UNITS) == passages.sentence_units(text)
    assert passages.sentence_units(text)
    m = memory(text)
    assert passages.rerank_texts(QUERY, m) == passages.rerank_texts(QUERY, m)


def test_units_apart_take_the_units_sharing_nothing_with_those_taken_first() -> None:
    # passages.UNITS_APART (off: measured, not the default): the order after the first unit puts the units that share
    # no character with any taken before them first, then the others in their order.
    spans = [(0, 100), (50, 150), (120, 220), (160, 260)]
    assert passages._apart([1, 0, 2, 3], spans) == [1, 3, 0, 2]
    assert passages._apart([0, 2, 1, 3], spans) == [0, 2, 1, 3]
    text = long_turn()
    saved = passages.UNITS_APART
    try:
        passages.UNITS_APART = True
        reads = passages.rerank_texts(QUERY, memory(text))
    finally:
        passages.UNITS_APART = saved
    assert len(reads) == passages.TURN_SENTENCES and reads != passages.rerank_texts(QUERY, memory(text))


def test_units_with_the_speaker_carry_the_turns_label(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # passages.UNIT_SPEAKER (off: measured, not the default): each unit that does not start the content reads with the
    # content's speaker label as written; a content that names no speaker reads its units as they are.
    assert not passages.UNIT_SPEAKER
    text = long_turn()
    bare = passages.rerank_texts(QUERY, memory(text))
    monkeypatch.setattr(passages, "UNIT_SPEAKER", True)
    labelled = passages.rerank_texts(QUERY, memory(text))
    assert len(labelled) == len(bare) == passages.TURN_SENTENCES
    for b, lab in zip(bare, labelled, strict=True):
        unit = b.removeprefix("[8 May 2023] ")
        assert lab == ("[8 May 2023] " + unit if unit.startswith("assistant: ") else f"[8 May 2023] assistant: {unit}")
    assert passages._labelled("Caroline: Hi. Bye.", ["Caroline: Hi.", "Bye."]) == ["Caroline: Hi.", "Caroline: Bye."]
    assert passages._labelled("用户：你好。再见。", ["用户：你好。", "再见。"]) == ["用户：你好。", "用户：再见。"]
    assert passages._labelled("Hi there. Bye now.", ["Hi there.", "Bye now."]) == ["Hi there.", "Bye now."]
