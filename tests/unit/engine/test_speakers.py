"""The speaker a question names (server/engine/speakers.py): whose turns it raises, and when it leaves a query alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

from server.domain import MemoryType
from server.engine import speakers
from tests import store_support


def memory(text: str, type: MemoryType = MemoryType.EPISODIC):  # type: ignore[no-untyped-def]  # noqa: A002
    return store_support.stored(0, text, created=10**12, type=type)


TURNS = [memory("Melanie: Thanks for the tip, Caroline. Doing research makes sense."),
         memory("Caroline: Researching adoption agencies has been my dream."),
         memory("Caroline: counts as a fact here", MemoryType.SEMANTIC),
         memory("no speaker at all"), None]


def test_the_named_speakers_turns_rise_by_the_factor_and_nothing_else_moves() -> None:
    rel = np.array([0.30, 0.25, 0.2, 0.1, 0.05])
    out = speakers.speaker_relevance("What did Caroline research?", TURNS, rel)
    assert out[1] == pytest.approx(0.25 * speakers.SPEAKER_FACTOR)
    assert out[1] > out[0]                       # the answer now outranks the other speaker's reply
    assert out[[0, 2, 3, 4]].tolist() == rel[[0, 2, 3, 4]].tolist()   # another speaker, a fact, no speaker, purged
    assert rel.tolist() == [0.30, 0.25, 0.2, 0.1, 0.05]                # the input is not changed


def test_a_relevance_stays_a_probability() -> None:
    out = speakers.speaker_relevance("What did Caroline research?", TURNS, np.array([0.1, 0.9, 0.2, 0.1, 0.1]))
    assert out[1] == speakers.MAX_RELEVANCE
    out = speakers.speaker_relevance("What did Caroline research?", TURNS, np.array([0.1, 0.9995, 0.2, 0.1, 0.1]))
    assert out[1] == 0.9995                       # never lowered


@pytest.mark.parametrize("query", ["What do Caroline and Melanie both like?",    # two speakers: either may answer
                                   "What did Carolinea research?",                # not the name as a word
                                   "what did the team decide?"])                  # no speaker named
def test_no_single_named_speaker_leaves_the_order_alone(query: str) -> None:
    rel = np.array([0.30, 0.25, 0.2, 0.1, 0.05])
    assert speakers.speaker_relevance(query, TURNS, rel) is rel
    assert speakers.speaker_relevance("What did Caroline research?", TURNS, rel, factor=1.0) is rel


def test_names_are_read_as_words_and_cjk_names_as_text() -> None:
    assert speakers.named_speaker("Where did Caroline's family go?", ["Caroline", "Melanie"]) == "Caroline"
    assert speakers.named_speaker("Which city have both Jean and John visited?", ["Jon", "Gina"]) == ""
    assert speakers.named_speaker("小明去年去了哪里？", ["小明", "小红"]) == "小明"
    assert speakers.speakers_of(TURNS) == ["Melanie", "Caroline", "", "", ""]


CHAT = [memory("assistant: Rome in spring is lovely; the Borghese gallery needs a booking."),
        memory("user: I booked the Borghese gallery for the 14th."),
        memory("User: my sister lives in Rome."),
        memory("用户：我下周去罗马。"),
        memory("Caroline: no role here")]


def test_chat_roles_are_speakers_in_any_case() -> None:
    assert speakers.speakers_of(CHAT) == ["assistant", "user", "user", "用户", "Caroline"]


@pytest.mark.parametrize("query", ["What did I book in Rome?", "Where does my sister live?",
                                   "I'm going to Rome, what did I plan?", "what have i booked?"])
def test_a_first_person_question_names_the_user(query: str) -> None:
    rel = np.array([0.40, 0.30, 0.1, 0.1, 0.1])
    out = speakers.speaker_relevance(query, CHAT[:3], rel[:3])
    assert out[1] == pytest.approx(0.30 * speakers.SPEAKER_FACTOR) and out[1] > out[0]
    assert out[0] == rel[0]


@pytest.mark.parametrize("query", ["What did you recommend for my trip?",      # the second person: maybe the assistant
                                   "What is in the Borghese gallery?",         # no person
                                   "What did we book?"])                       # we: both
def test_other_questions_leave_the_roles_alone(query: str) -> None:
    rel = np.array([0.40, 0.30, 0.1])
    assert speakers.speaker_relevance(query, CHAT[:3], rel) is rel


@pytest.mark.parametrize("query", ["Can you suggest a hotel for my trip to Rome?", "Could you plan a day for me?",
                                   "Do you remember what I booked in Rome?", "Can you remind me where my sister lives?",
                                   "What did I tell you about the gallery?", "Thanks! Would you help me pack?",
                                   "你能帮我想想在罗马玩什么吗？", "你还记得我订了什么吗？", "我跟你说过我妹妹住哪儿吗？"])
def test_a_request_to_act_or_recall_is_still_about_the_user(query: str) -> None:
    assert speakers.first_person(query)
    assert speakers.named_speaker(query, ["user", "assistant"]) == "user"
    speakers.REQUESTS = False
    try:
        assert not speakers.first_person(query)   # before: any "you" (你) kept the rule off
    finally:
        speakers.REQUESTS = True


@pytest.mark.parametrize("query", ["Can you remind me what you recommended for my trip?", "What did you suggest?",
                                   "Could you repeat what you said about my sister?", "Do you like Rome?",
                                   "你推荐过哪些地方？", "你能再说一遍你推荐的餐厅吗？"])
def test_a_you_left_after_the_request_still_asks_about_the_assistant(query: str) -> None:
    assert not speakers.first_person(query)


@pytest.mark.parametrize(("query", "act"), [
    ("Can you suggest what I should cook for my friends?", True), ("Plan a holiday for me in the autumn.", True),
    ("Any tips for my first marathon?", True), ("Which laptop should I buy?", True),
    ("你能帮我想想周末做什么菜吗？", True), ("Can you remind me what I said about boats?", False),
    ("Do you remember what I told you about my diet?", False), ("What did I cook on Saturday?", False),
    ("你还记得我对什么过敏吗？", False)])
def test_a_request_to_act_is_told_from_one_to_recall(query: str, act: bool) -> None:
    assert speakers.asks_to_act(query) is act


def test_a_request_to_act_takes_the_request_factor(monkeypatch: pytest.MonkeyPatch) -> None:
    rel = np.array([0.40, 0.30, 0.1])
    monkeypatch.setattr(speakers, "REQUEST_FACTOR", 3.0)
    act = speakers.speaker_relevance("Can you suggest a gallery for my trip?", CHAT[:3], rel)
    recall = speakers.speaker_relevance("Do you remember what I booked?", CHAT[:3], rel)
    assert act[1] == pytest.approx(0.30 * 3.0) and recall[1] == pytest.approx(0.30 * speakers.SPEAKER_FACTOR)
    assert act[0] == recall[0] == rel[0]


def test_the_user_role_needs_another_speaker_beside_it_and_only_one_user_role() -> None:
    assert speakers.named_speaker("What did I book?", ["user", "user"]) == ""           # nothing to prefer
    assert speakers.named_speaker("What did I book?", ["user", "用户", "assistant"]) == ""   # two user roles
    assert speakers.named_speaker("What did I book?", ["Caroline", "Melanie"]) == ""    # names, no role
    assert speakers.named_speaker("What did I book?", ["user", "assistant"], roles=False) == ""
    assert speakers.named_speaker("我下周去哪里？", ["用户", "助手"]) == "用户"
    assert speakers.named_speaker("你推荐了什么？", ["用户", "助手"]) == ""
    # A role the question names as a word is named like any speaker.
    assert speakers.named_speaker("What did the assistant suggest?", ["user", "assistant"]) == "assistant"


@pytest.mark.parametrize(("text", "asking"), [
    ("That's awesome! What made you pick pottery?", True),
    ("How about you? 😊", True),                       # symbols after the question mark
    ('Did you keep the bowl?"', True),
    ("你周末去哪儿了？", True),
    ("I went there. Was it fun? Yes, it was great.", False),   # the turn ends with an answer
    ("Wow, cool! 🙂", False),
    (" ".join(["word"] * 40) + "?", False),           # a narrative, longer than updates.MAX_WORDS words
    ("我" * 40 + "？", False),                          # CJK characters count as words
])
def test_a_turn_asks_when_it_ends_with_a_question(text: str, asking: bool) -> None:
    assert speakers.asks(text) is asking


@pytest.mark.parametrize("text", ["How about you? 😊", 'Did you keep the bowl?"', "Wow, cool! 🙂 ", "x²", "½ )",
                                  "snake_case_", "Really… »", "好的。」", "你呢？\u3000", "", "!!", "🙂🙂", "a (b) [c]"])
def test_the_symbols_after_the_last_sentence_go_as_the_rule_reads_them(text: str) -> None:
    # The rule: a run of anything but word characters and sentence ends, at the end of the turn. Read from the end
    # (a regex anchored at the end tries every position of a long turn); the same characters go.
    assert speakers._without_trailing(text) == re.sub(r"[^\w?？.!。！]+$", "", text)


def test_a_long_turn_with_a_question_inside_does_not_ask() -> None:
    turn = "Caroline: Did you go? " + "We went to the lake and swam for hours, it was lovely. " * 20 + "🙂"
    assert not speakers.asks(turn)
    assert speakers.asks("Caroline: " + "so " * 20 + "did you go? 🙂")


ASKING = [memory("Melanie: That's awesome! What made you pick pottery?"),
          memory("Caroline: My aunt taught me when I was young, so it felt like home."),
          memory("user: I adopted a puppy last week, what should she eat?"),        # a request to an assistant
          memory("Assistant: Would you like a feeding plan?"),
          memory("Melanie: did you keep the bowl?", MemoryType.SEMANTIC),           # not a turn
          memory("is this a question?"), None]


def test_a_named_speakers_asking_turn_falls_by_the_factor_and_nothing_else_moves() -> None:
    rel = np.array([0.4, 0.3, 0.2, 0.2, 0.1, 0.1, 0.05])
    out = speakers.question_relevance(ASKING, rel)
    assert out[0] == pytest.approx(0.4 * speakers.QUESTION_FACTOR) and out[0] < out[1]
    assert out[1:].tolist() == rel[1:].tolist()   # an answer, chat roles, a fact, no speaker, purged
    assert rel.tolist() == [0.4, 0.3, 0.2, 0.2, 0.1, 0.1, 0.05]


def test_the_question_rule_returns_the_same_array_when_nothing_asks_or_it_is_off() -> None:
    rel = np.array([0.3, 0.2])
    assert speakers.question_relevance(TURNS[:2], rel) is rel
    assert speakers.question_relevance(ASKING[:2], rel, factor=1.0) is rel


def test_unnamed_takes_the_name_out() -> None:
    assert speakers.unnamed("What did Caroline research?", "Caroline") == "What did they research?"
    assert speakers.unnamed("What is Caroline’s dog called?", "Caroline") == "What is their dog called?"
    assert speakers.unnamed("Did Carol meet Caroline?", "Carol") == "Did they meet Caroline?"   # a word, not a prefix


def test_the_listed_speaker_is_one_named_speaker_never_a_role_or_cjk(monkeypatch: pytest.MonkeyPatch) -> None:
    turns = [memory("Caroline: I went to a support group."), memory("Melanie: I paint on Sundays.")]
    assert speakers.listed_speaker("What does Melanie paint?", turns) == "Melanie"
    assert speakers.listed_speaker("What do Melanie and Caroline share?", turns) == ""   # two: none
    assert speakers.listed_speaker("What did I book?", CHAT[:3]) == ""                  # the first person: a role
    assert speakers.listed_speaker("李雷说了什么？", [memory("李雷：我去了北京。"), memory("韩梅梅：我也去了。")]) == ""
    monkeypatch.setattr(speakers, "SPEAKER_LIST", False)
    assert speakers.listed_speaker("What does Melanie paint?", turns) == ""


def test_the_names_a_question_names_again_are_found_in_order_and_never_for_cjk() -> None:
    known = ["Melanie", "Caroline", "Jon"]
    assert speakers.names_in("Did Caroline and Melanie meet Jon?", known) == ["Melanie", "Caroline"]   # at most 2
    assert speakers.names_in("What did Caroline's sister say?", known) == ["Caroline"]
    assert speakers.names_in("What did Jonathan do?", known) == []   # a word, not a prefix
    assert speakers.names_in("Caroline 最近在忙什么？", known) == []
