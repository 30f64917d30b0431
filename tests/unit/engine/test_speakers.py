"""The speaker a question names (server/engine/speakers.py): whose turns it raises, and when it leaves a query alone."""

from __future__ import annotations

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
