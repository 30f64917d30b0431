"""Time intent in a query (server/engine/time_intent.py) and the update factor it drives."""

from __future__ import annotations

import numpy as np
import pytest

from server.domain import TimeIntent
from server.engine.time_intent import UPDATED_FACTOR, detect, recency_weight, update_factor
from server.store.columns import UPDATED_BY, UPDATES


@pytest.mark.parametrize(("text", "intent"), [
    ("which laptop am I using now?", TimeIntent.CURRENT),
    ("what do I eat these days", TimeIntent.CURRENT),
    ("what is my latest address", TimeIntent.CURRENT),
    ("我现在住在哪里？", TimeIntent.CURRENT),
    ("目前的预算是多少", TimeIntent.CURRENT),
    ("我最近在学什么？", TimeIntent.CURRENT),
    ("which laptop did I have before?", TimeIntent.PAST),
    ("where did I use to live", TimeIntent.PAST),
    ("what was my previous job", TimeIntent.PAST),
    ("我以前用什么手机？", TimeIntent.PAST),
    ("原来的预算是多少", TimeIntent.PAST),
    ("what was my ex called?", TimeIntent.PAST),   # a former partner is an earlier state
    ("where does my ex-husband live", TimeIntent.PAST),
    ("我前女友叫什么？", TimeIntent.PAST),
    ("what did I get in my exam?", TimeIntent.NONE),
    ("我前天去了哪里？", TimeIntent.NONE),   # the day before yesterday is a time
    ("what was my first phone?", TimeIntent.FIRST),
    ("which city did I originally live in", TimeIntent.FIRST),
    ("what did I drive at first", TimeIntent.FIRST),
    ("我最初的工作是什么？", TimeIntent.FIRST),
    ("一开始的预算是多少", TimeIntent.FIRST),
    ("what did I use before the one I have now?", TimeIntent.PAST),   # past wins over current
    ("what phone do I have?", TimeIntent.NONE),
    ("what did we eat before the concert?", TimeIntent.NONE),   # a time, not a state: server/temporal.py's
    ("what did I earn before the raise?", TimeIntent.PAST),   # a change of state, not a time
    ("who was my manager before the reorg?", TimeIntent.PAST),
    ("where did we live before the wedding?", TimeIntent.NONE),   # an event: a time
    ("how old is Melanie's son?", TimeIntent.NONE),
    ("when was the first time she went hiking", TimeIntent.NONE),
    ("晚饭吃了什么？", TimeIntent.NONE),
    # the order of events, not a state: both are asked for
    ("Which did I do first, the pottery workshop or the cooking class?", TimeIntent.NONE),
    ("Did I go to Kyoto or Lisbon first?", TimeIntent.NONE),
    ("Which happened earlier, passing my test or buying the car?", TimeIntent.NONE),
    ("List the gigs I went to from earliest to latest.", TimeIntent.NONE),
    ("In what order did I read these books?", TimeIntent.NONE),
    ("我是先学的吉他还是先学的钢琴？", TimeIntent.NONE),
    ("杭州和成都哪个先去的？", TimeIntent.NONE),
    ("what was my first phone, or do you not know?", TimeIntent.NONE),   # an "or" with an order word: read as order
    ("which was my first phone?", TimeIntent.FIRST),
    ("which laptop did I have earlier?", TimeIntent.PAST),
])
def test_detect(text: str, intent: TimeIntent) -> None:
    assert detect(text) == intent


def test_order_questions_are_read_by_their_cue_words_when_the_rule_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.engine import time_intent

    monkeypatch.setattr(time_intent, "ORDER_QUESTIONS", False)
    assert detect("Which did I do first, the pottery workshop or the cooking class?") == TimeIntent.FIRST
    assert detect("List the gigs I went to from earliest to latest.") == TimeIntent.CURRENT


def test_recency_weight_rises_for_current_and_drops_for_the_past() -> None:
    assert recency_weight(TimeIntent.NONE, 0.3) == 0.3
    assert recency_weight(TimeIntent.CURRENT, 0.3) > 0.3
    assert recency_weight(TimeIntent.PAST, 0.3) == recency_weight(TimeIntent.FIRST, 0.3) == 0.0


def test_update_factor_without_links_is_one_except_first_prefers_older() -> None:
    links, decay, rel = np.zeros(3, np.int8), np.array([1.0, 0.5, 0.0]), np.array([0.5, 0.4, 0.3])
    for intent in (TimeIntent.NONE, TimeIntent.CURRENT, TimeIntent.PAST):
        assert update_factor(intent, links, decay, rel, chains={}, target_of=lambda t, w: None).tolist() == [1, 1, 1]
    first = update_factor(TimeIntent.FIRST, links, decay, rel, chains={}, target_of=lambda t, w: None)
    assert first[0] < first[1] < first[2]


def test_a_chain_answers_as_one_with_the_member_the_intent_asks_for() -> None:
    # candidates 0 (oldest) -> 1 -> 2 (newest) form one chain; 3 is unlinked
    links = np.array([UPDATED_BY, UPDATED_BY | UPDATES, UPDATES, 0], np.int8)
    rel = np.array([0.6, 0.2, 0.1, 0.3])
    chains = {"tip": [0, 1, 2]}
    wants = {"current": 2, "previous": 1, "first": 0}
    for intent, target in ((TimeIntent.NONE, 2), (TimeIntent.CURRENT, 2), (TimeIntent.PAST, 1)):
        f = update_factor(intent, links, np.ones(4), rel, chains=chains, target_of=lambda t, w: wants[w])
        assert rel[target] * f[target] == pytest.approx(0.6)   # the chain's best relevance
        assert all(f[j] == pytest.approx(UPDATED_FACTOR) for j in (0, 1, 2) if j != target)
        assert f[3] == 1.0
    # the member asked for is not a candidate: NONE still demotes what a newer memory updates
    f = update_factor(TimeIntent.NONE, links, np.ones(4), rel, chains=chains, target_of=lambda t, w: None)
    assert f.tolist() == pytest.approx([UPDATED_FACTOR, UPDATED_FACTOR, 1.0, 1.0])
