"""Importance intent (server/engine/importance_intent.py): a query asking what to know or remember."""

from __future__ import annotations

import pytest

from server.engine.importance_intent import INTENT_IMPORTANCE_WEIGHT, asks_what_matters, importance_weight


@pytest.mark.parametrize(("text", "asks"), [
    ("anything I should know about nuts?", True),
    ("what should I remember about the car?", True),
    ("what do I need to know about the boiler?", True),
    ("anything about raisins to keep in mind?", True),
    ("anything important about the visa?", True),
    ("关于花生有什么要注意的？", True),
    ("吃药有什么要记住的？", True),
    ("妈妈的身体有什么要留意的？", True),
    ("why are flowers important to Melanie?", False),          # importance as the topic
    ("What does Joanna do to remember happy memories?", False),  # remembering in the story
    ("what phone do I have?", False),
    ("晚饭吃了什么？", False),
])
def test_asks_what_matters(text: str, asks: bool) -> None:
    assert asks_what_matters(text) is asks


def test_the_weight_rises_only_for_the_intent_and_never_falls() -> None:
    assert importance_weight("anything I should know about nuts?", 0.3) == INTENT_IMPORTANCE_WEIGHT > 0.3
    assert importance_weight("what phone do I have?", 0.3) == 0.3
    assert importance_weight("anything I should know about nuts?", 1.0) == 1.0
