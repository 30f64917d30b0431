"""The multi-session, preference, requests and order sets (benchmarks/quality/data, written for this project): well
formed, each multi-session question needs turns from two or more days, both halves and both languages present."""

from __future__ import annotations

import pytest

from benchmarks.quality.block import block_recall
from benchmarks.quality.sessions import SETS, inputs, load_set


@pytest.mark.parametrize("name", SETS)
def test_every_judged_memory_exists_and_both_halves_and_languages_are_there(name: str) -> None:
    data = load_set(name)
    ids = {m["id"] for m in data.memories}
    assert len(ids) == len(data.memories)
    assert all(set(rel) <= ids and rel for rel in data.qrels.values())
    assert set(data.half.values()) == {"dev", "held_out"} and set(data.lang.values()) == {"en", "zh"}
    written = inputs(data.memories)
    assert [m.created_at_ms for _, m in written] == sorted(m.created_at_ms for _, m in written)   # oldest first


def test_each_multisession_question_needs_turns_from_different_days() -> None:
    data = load_set("multisession")
    age = {m["id"]: m["age_days"] for m in data.memories}
    for rel in data.qrels.values():
        assert len(rel) >= 2 and len({age[r] for r in rel}) >= 2


def test_each_order_question_asks_for_two_events_of_different_days_and_reads_no_time_intent() -> None:
    from server.domain import TimeIntent
    from server.engine.time_intent import detect

    data = load_set("order")
    age = {m["id"]: m["age_days"] for m in data.memories}
    for q in data.queries:
        rel = data.qrels[q.id]
        assert len(rel) == 2 and len({age[r] for r in rel}) == 2, q.id
        assert detect(q.text) == TimeIntent.NONE, q.text


def test_block_recall_counts_the_share_of_evidence_the_block_holds() -> None:
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}}
    assert block_recall({"q1": ["a", "x"], "q2": []}, qrels, ["q1", "q2"]) == pytest.approx(0.25)
    assert block_recall({"q1": ["b", "a"]}, qrels, ["q1"]) == 1.0


def test_the_requests_set_asks_about_the_users_words_and_the_assistants() -> None:
    from benchmarks.quality.requests import kinds
    from server.engine.speakers import first_person

    data, kind = load_set("requests"), kinds()
    said = {m["id"]: m["content"].partition(":")[0] for m in data.memories}
    assert set(said.values()) == {"user", "assistant"} and set(kind.values()) == {"request", "recall", "assistant"}
    for q in data.queries:
        speakers = {said[r] for r in data.qrels[q.id]}
        assert speakers == ({"assistant"} if kind[q.id] == "assistant" else {"user"}), q.id
        # the rule reads each kind as meant; a request that names no person at all ("Can you suggest a family day out
        # for the weekend?") cannot name the user
        personal = any(w in q.text.lower().replace("?", " ").split() for w in ("i", "me", "my")) or "我" in q.text
        assert first_person(q.text) == (kind[q.id] != "assistant" and personal), q.text
