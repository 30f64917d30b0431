"""Sibling statements at search time (server/engine/siblings.py): the newest of a set the query cannot tell apart."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from server.domain import Memory, MemoryType, TimeIntent
from server.engine.siblings import sibling_factor, sibling_sets
from tests.store_support import stored


def _mems(*specs: tuple[str, int]) -> list[Memory]:
    return [stored(i, text, created=at) for i, (text, at) in enumerate(specs)]


def _at(mems: list[Memory | None]):  # type: ignore[no-untyped-def]
    return lambda i: mems[i]


def test_repeated_events_form_a_set_and_the_newest_gets_the_best_relevance() -> None:
    mems = _mems(("Bought apples and cheese at the market", 100), ("Bought fresh figs and sourdough at the market", 900),
                 ("My cat is called Miso", 500))
    rel = np.array([0.6, 0.3, 0.1])
    assert sibling_sets("what did I buy at the market?", _at(mems), rel) == [[0, 1]]
    factor = sibling_factor("what did I buy at the market?", TimeIntent.NONE, _at(mems), rel)
    assert factor.tolist() == [1.0, 2.0, 1.0]   # the newer one now ranks with 0.6; nothing is demoted


def test_chinese_statements_the_query_matches_alike_are_siblings() -> None:
    mems = _mems(("我去黄山爬山了", 100), ("我去泰山爬山了", 900))
    assert sibling_sets("我去哪里爬山了？", _at(mems), np.array([0.5, 0.3])) == [[0, 1]]


def test_a_query_word_only_one_of_them_has_keeps_them_apart() -> None:
    # "Toronto" tells them apart: the query names a value, not just the shared frame.
    mems = _mems(("My sister lives in Madrid", 100), ("My sister lives in Toronto", 900))
    assert sibling_sets("does my sister live in Madrid?", _at(mems), np.array([0.6, 0.3])) == []
    assert sibling_sets("where does my sister live", _at(mems), np.array([0.6, 0.3])) == [[0, 1]]


def test_different_subjects_speakers_questions_and_restatements_are_never_siblings() -> None:
    rel = np.array([0.6, 0.3])
    q = "where does she work"
    for a, b in [("My sister works at a bank", "My brother works at a school"),          # other people
                 ("Caroline: I work at a bank", "Melanie: I work at a school"),           # other speakers
                 ("I work at a bank", "Do you still work at a bank?"),                    # a question
                 ("I work at a bank", "I work at a bank")]:                               # a restatement
        assert sibling_sets(q, _at(_mems((a, 100), (b, 900))), rel) == [], (a, b)


def test_only_the_most_relevant_candidates_join_and_linked_ones_never() -> None:
    mems: list[Memory | None] = list(_mems(("Went hiking in the Lake District", 100), ("Went hiking on Snowdon", 900)))
    rel = np.array([0.6, 0.3])
    assert sibling_sets("where did I go hiking?", _at(mems), rel, top_n=1) == []
    mems[1] = None   # linked: its chain answers for it
    assert sibling_sets("where did I go hiking?", _at(mems), rel) == []


def test_the_past_and_first_intents_and_other_types_are_left_alone() -> None:
    mems = _mems(("Went hiking in the Lake District", 100), ("Went hiking on Snowdon", 900))
    rel = np.array([0.6, 0.3])
    for intent in (TimeIntent.PAST, TimeIntent.FIRST):
        assert sibling_factor("where did I go hiking?", intent, _at(mems), rel).tolist() == [1.0, 1.0]
    assert sibling_factor("where did I go hiking now", TimeIntent.CURRENT, _at(mems), rel).tolist() == [1.0, 2.0]
    rule = stored(2, "Went hiking only with a map", created=900, type=MemoryType.PROCEDURAL)
    assert sibling_sets("where did I go hiking?", _at([mems[0], rule]), rel) == []


def test_a_set_without_a_single_newest_member_is_left_alone() -> None:
    # written at the same time (one session's turns): age cannot tell them apart
    mems = _mems(("Went hiking in the Lake District", 500), ("Went hiking on Snowdon", 500))
    assert sibling_sets("where did I go hiking?", _at(mems), np.array([0.6, 0.3])) == []
    mems = _mems(("Went hiking in the Lake District", 100), ("Went hiking on Snowdon", 500), ("Went hiking in Wales", 500))
    assert sibling_sets("where did I go hiking?", _at(mems), np.array([0.6, 0.3, 0.2])) == []


# -- newest_first: groups of statements about one attribute hold their slots newest first -------------------------

def _unit(*rows: list[float]) -> np.ndarray:
    v = np.asarray(rows, dtype=np.float64)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _close(n: int, *, group: tuple[int, ...], cosine: float) -> np.ndarray:
    """n unit vectors: those in ``group`` at ``cosine`` to each other, every other pair orthogonal."""
    import math
    out = np.zeros((n, n + 1))
    for i in range(n):
        if i in group:
            out[i, 0] = math.sqrt(cosine)
            out[i, i + 1] = math.sqrt(1 - cosine)
        else:
            out[i, i + 1] = 1.0
    return out


def test_a_newer_statement_the_query_matches_alike_takes_the_older_ones_slot() -> None:
    from server.engine.siblings import newest_first
    mems = _mems(("Bought apples and cheese at the market", 100), ("My cat is called Miso", 500),
                 ("Bought fresh figs and sourdough at the market", 900))
    assert newest_first("what did I buy at the market?", TimeIntent.NONE, mems) == [2, 1, 0]
    assert newest_first("what did I buy at the market now?", TimeIntent.CURRENT, mems) == [2, 1, 0]
    # "apples" tells them apart: the query names a value one of them holds
    assert newest_first("did I buy apples at the market?", TimeIntent.NONE, mems) == [0, 1, 2]
    # nothing in common with the query: nothing moves
    assert newest_first("what is my cat called?", TimeIntent.NONE, mems) == [0, 1, 2]


def test_a_word_most_top_statements_hold_is_their_subject_not_the_attribute() -> None:
    from server.engine.siblings import matched_words, newest_first
    texts = ["The user prefers aisle seats", "The user's blood type is O", "The user's car is a BYD Seal",
             "The user's coffee is a flat white"]
    assert matched_words("what car does the user have?", texts) == [frozenset(), frozenset(), frozenset({"car"}),
                                                                     frozenset()]
    mems = _mems(*((t, 100 * (i + 1)) for i, t in enumerate(texts)))
    assert newest_first("what does the user like?", TimeIntent.NONE, mems) == [0, 1, 2, 3]
    # Chinese: character bigrams are the words; single characters are no evidence
    zh = _mems(("我去黄山爬山了", 100), ("我去泰山爬山了", 900), ("我的狗叫旺财", 500))
    assert newest_first("我去哪里爬山了？", TimeIntent.NONE, zh) == [1, 0, 2]
    assert matched_words("山在哪？", ["我去黄山爬山了", "我去泰山爬山了"]) == [frozenset(), frozenset()]


def test_pair_cosine_is_evidence_only_when_asked_for_and_higher_for_chinese() -> None:
    from server.engine.siblings import newest_first
    from server.engine.updates import LINK_COSINE_CJK_SHIFT
    mems = _mems(("I work as an analyst at Deloitte", 100), ("I take the 8:15 train every morning", 500),
                 ("I started a new job as a data engineer at Spotify", 900))
    close = _close(3, group=(0, 2), cosine=0.9)
    assert newest_first("where am I employed?", TimeIntent.NONE, mems, close) == [0, 1, 2]   # PAIR_COSINE None
    assert newest_first("where am I employed?", TimeIntent.NONE, mems, close, min_cosine=0.86) == [2, 1, 0]
    assert newest_first("where am I employed?", TimeIntent.NONE, mems, close, min_cosine=0.92) == [0, 1, 2]
    zh = _mems(("我在读《活着》", 100), ("我在读《三体》", 900))
    just_below = _close(2, group=(0, 1), cosine=0.86 + LINK_COSINE_CJK_SHIFT - 0.01)
    above = _close(2, group=(0, 1), cosine=0.86 + LINK_COSINE_CJK_SHIFT + 0.01)
    assert newest_first("我在看什么？", TimeIntent.NONE, zh, just_below, min_cosine=0.86) == [0, 1]
    assert newest_first("我在看什么？", TimeIntent.NONE, zh, above, min_cosine=0.86) == [1, 0]
    # PAIR_NEEDS_CHANGE: the cosine counts only where the newer statement names a change ("switched" does; "a new
    # job" alone is a present-only cue)
    from server.engine import siblings
    switched = [*mems[:2], _mems(("I switched to Spotify as a data engineer", 900))[0]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(siblings, "PAIR_NEEDS_CHANGE", True)
        assert newest_first("where am I employed?", TimeIntent.NONE, switched, close, min_cosine=0.86) == [2, 1, 0]
        assert newest_first("where am I employed?", TimeIntent.NONE, mems, close, min_cosine=0.86) == [0, 1, 2]
        assert newest_first("我在看什么？", TimeIntent.NONE, zh, above, min_cosine=0.86) == [0, 1]   # no change cue


def test_past_first_other_subjects_links_questions_and_equal_ages_stay_in_place() -> None:
    from server.engine.siblings import newest_first, statement_words
    q = "where did I go hiking?"
    cat = ("My cat is called Miso", 500)   # a third statement: with two, no word can be told from their subject
    pair = _mems(("Went hiking in the Lake District", 100), ("Went hiking on Snowdon", 900), cat)
    assert newest_first(q, TimeIntent.NONE, pair) == [1, 0, 2]
    for intent in (TimeIntent.PAST, TimeIntent.FIRST):
        assert newest_first(q, intent, pair) == [0, 1, 2]
    for a, b in [("My sister went hiking in Wales", "My brother went hiking in Spain"),     # other people
                 ("Caroline: I went hiking in Wales", "Melanie: I went hiking in Spain"),   # other speakers
                 ("I went hiking in Wales", "Did you go hiking in Spain?"),                  # a question
                 ("I went hiking in Wales", "I went hiking in Wales"),                       # a restatement
                 ("I went hiking in Wales", "I went hiking in Spain " + "and more " * 20)]:  # a narrative
        assert newest_first(q, TimeIntent.NONE, _mems((a, 100), (b, 900), cat)) == [0, 1, 2], (a, b)
    other_scope = [pair[0], dataclasses.replace(pair[1], scope="work"), pair[2]]
    linked = [pair[0], dataclasses.replace(pair[1], updates=("m_0000",)), pair[2]]
    same_age = _mems(("Went hiking in the Lake District", 500), ("Went hiking on Snowdon", 500), cat)
    for mems in (other_scope, linked, same_age, [pair[0], None, pair[2]]):
        assert newest_first(q, TimeIntent.NONE, mems) == [0, 1, 2]
    assert statement_words("我跳槽到字节跳动上班了") == 11
    long_zh = _mems(("用户团队计划下半年将核心数据库从自建集群改为云上托管服务，当前最关注迁移成本与停机时间", 100),
                    ("用户团队计划下半年将核心数据库从自建集群改为云上托管服务，当前最关注停机时间", 900))
    assert newest_first("数据库迁移", TimeIntent.NONE, long_zh) == [0, 1]   # 40 characters: no statement


def test_groups_keep_the_slots_they_held() -> None:
    from server.engine.siblings import newest_first
    mems = _mems(("Cooked lasagna for dinner", 300), ("My cat is called Miso", 50), ("I like jazz", 60),
                 ("Planted tomatoes in the garden", 70), ("Cooked a green curry for dinner", 900))
    # the two dinners held slots 0 and 4: they still do, newest first; slots 1 to 3 untouched
    assert newest_first("what did I have for dinner?", TimeIntent.NONE, mems) == [4, 1, 2, 3, 0]
    # three of the top five holding "dinner": the word the search found them by, not their subject; newest first
    three = [*mems[:4], mems[4]]
    three[1] = _mems(("Cooked risotto for dinner", 600))[0]
    assert newest_first("what did I have for dinner?", TimeIntent.NONE, three) == [4, 1, 2, 3, 0]


def test_only_a_subject_word_or_a_name_most_hits_hold_is_dropped() -> None:
    from server.engine import siblings
    commute = _mems(("I cycle to work", 100), ("I work from home on Fridays", 200), ("My cat is called Miso", 50),
                    ("I take the bus to work these days", 900))
    # "work" is what the query asks about, held by three of the hits: it groups them, newest first
    assert siblings.newest_first("how do I get to work?", TimeIntent.NONE, commute) == [3, 1, 2, 0]
    with pytest.MonkeyPatch.context() as mp:   # the rule before: any word most hits hold was their subject
        mp.setattr(siblings, "SUBJECT_WORDS", None)
        assert siblings.newest_first("how do I get to work?", TimeIntent.NONE, commute) == [0, 1, 2, 3]
    # an attribute most hits name first, in lower case ("My alarm is …"): not their subject, it groups them
    alarm = _mems(("The alarm at the office went off", 300), ("My alarm is set for 6:00", 200),
                  ("I moved my alarm to 6:45", 900))
    assert siblings.newest_first("when does my alarm go off?", TimeIntent.NONE, alarm) == [2, 0, 1]
    # a name the query writes with a capital is the hits' subject when most hold it: no group by it alone
    named = _mems(("Caroline likes green tea", 100), ("Caroline adopted a dog", 500), ("Caroline moved to Leeds", 900))
    assert siblings.newest_first("what does Caroline like?", TimeIntent.NONE, named) == [0, 1, 2]
    # the name written in lower case: it stands first in the hits that hold it, their subject still
    assert siblings.newest_first("what does caroline like?", TimeIntent.NONE, named) == [0, 1, 2]
    with pytest.MonkeyPatch.context() as mp:   # a name kept as a word: the three holding it would group
        mp.setattr(siblings, "_subject_word", lambda word, query, texts: word in siblings.SUBJECT_WORDS)
        assert siblings.newest_first("what does Caroline like?", TimeIntent.NONE, named) == [2, 1, 0]


def test_statements_naming_different_entities_are_not_one_attribute() -> None:
    # the linker's subject rule: when both name explicit entities, they must name the same ones
    import dataclasses

    from server.engine.siblings import newest_first
    code = _mems(("用户用Neovim写代码", 100), ("周末用户会给开源项目写代码", 900), ("用户喜欢听爵士乐", 500))
    q = "用户平时用什么工具写代码？"
    assert newest_first(q, TimeIntent.NONE, code) == [1, 0, 2]   # no entities: grouped by 写代/代码
    named = [dataclasses.replace(code[0], entities=("Neovim",)), dataclasses.replace(code[1], entities=("开源", "限流库")),
             code[2]]
    assert newest_first(q, TimeIntent.NONE, named) == [0, 1, 2]
    same = [*(dataclasses.replace(m, entities=("billing database",)) for m in code[:2]), code[2]]
    assert newest_first(q, TimeIntent.NONE, same) == [1, 0, 2]
    one_side = [named[0], code[1], code[2]]
    assert newest_first(q, TimeIntent.NONE, one_side) == [1, 0, 2]


def test_two_statements_sharing_only_their_subject_keep_their_order() -> None:
    # With two statements, a word both hold cannot be told from their common subject: "user" here is not what
    # the question asks about, and the newer one must not become the answer.
    from server.engine.siblings import newest_first
    mems = _mems(("The user is vegetarian", 100), ("The user asked about train times to Porto", 900))
    assert newest_first("what food does the user eat?", TimeIntent.NONE, mems) == [0, 1]
    three = _mems(("The user is vegetarian", 100), ("The user asked about train times to Porto", 900),
                  ("The user has a cat called Miso", 500))
    assert newest_first("what food does the user eat?", TimeIntent.NONE, three) == [0, 1, 2]   # 3 of 3: subject


def test_hits_that_may_not_join_still_count_towards_what_their_common_subject_is() -> None:
    # Two statements share the query's word, and the other top hits (a linked memory, a question) do not hold it:
    # the word is the attribute the query asks about, not the hits' common subject, so the newer one answers.
    from server.engine import siblings
    mems = _mems(("My browser is Chrome", 100), ("Firefox is my browser now", 900),
                 ("What should I cook tonight?", 500), ("I switched my laptop to a Framework", 700))
    mems[3] = dataclasses.replace(mems[3], updates=("m-older",))   # linked: may not join
    assert siblings.newest_first("which browser do I use?", TimeIntent.NONE, mems) == [1, 0, 2, 3]
    # Counted only among the two that may join, a shared word that may be a subject was dropped as theirs: no group.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(siblings, "HITS_COUNT", False)
        mp.setattr(siblings, "SUBJECT_WORDS", None)
        assert siblings.newest_first("which browser do I use?", TimeIntent.NONE, mems) == [0, 1, 2, 3]
    # Held by three of the hits, joinable or not, a word is their subject still.
    user = _mems(("The user is vegetarian", 100), ("The user asked about train times to Porto", 900),
                 ("Which trains does the user take?", 500))
    assert siblings.newest_first("what food does the user eat?", TimeIntent.NONE, user) == [0, 1, 2]


def test_a_newer_statement_holding_every_query_word_of_the_older_one_joins_it() -> None:
    from server.engine.siblings import newest_first
    zh = _mems(("我喜欢的歌手是陈奕迅", 100), ("我的狗叫旺财", 500), ("现在最喜欢的歌手是毛不易", 900))
    assert newest_first("我最喜欢哪个歌手？", TimeIntent.NONE, zh) == [2, 1, 0]
    # not the other way: the newer one lacks the attribute's word ("type") and names another attribute
    en = _mems(("My blood type is O negative", 100), ("My cat is called Miso", 500), ("Donated blood at the town hall", 900))
    assert newest_first("what's my blood type?", TimeIntent.NONE, en) == [0, 1, 2]
