"""Sibling statements at search time (server/engine/siblings.py): the newest of a set the query cannot tell apart."""

from __future__ import annotations

import numpy as np

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
