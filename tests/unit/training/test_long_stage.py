"""training/long_stage.py: each dev question's evidence turn written long (its words inside other talk of the same
conversation) and read as the server reads a long turn; the positive a sentence unit that holds the line, the
negatives units that hold none of it."""

from __future__ import annotations

import random
from pathlib import Path

from server.engine import passages
from tests.unit.training.test_qa_stage import _TURNS, _Embedder, _write
from training.long_stage import MINED_NEGATIVES, OWN_NEGATIVES, _holds, long_form, long_groups


def test_a_long_form_is_a_long_turn_of_its_speaker_with_the_line_where_it_says() -> None:
    rng = random.Random(1)
    for text in ("I went to a pottery class.", "x" * 700):
        content, (a, b) = long_form("Ann", text, ["Some other talk about the weekend."], rng)
        assert content.startswith("Ann: ") and content[a:b] == text
        assert len(content) > passages.PASSAGE_CHARS   # the server reads it as a long turn
    assert _holds((0, 100), (50, 80)) == 1.0 and _holds((0, 100), (100, 200)) == 0.0
    assert _holds((0, 100), (60, 200)) == 0.4   # 40 of the unit's 100 characters


def test_groups_are_the_dev_questions_with_a_unit_holding_the_line_first(tmp_path: Path) -> None:
    groups, pairs = long_groups(_Embedder(), conversations=("conv-dev",), root=_write(tmp_path / "data"))
    assert pairs == 2 and len(groups) == 2   # one group per evidence turn
    assert {g.query for g in groups} == {"What dev question did Ann ask about topic 3?"}   # never the held-out one
    evidence = (_TURNS[3], _TURNS[4])
    positives = [g.passages[0] for g in groups]
    assert all(p.startswith("[3 May 2023] ") for p in positives)   # the date header, as the server reads a unit
    assert {next(t for t in evidence if t[:40] in p) for p in positives} == set(evidence)
    for g in groups:
        assert len(g.passages) == 1 + MINED_NEGATIVES + OWN_NEGATIVES
        assert all(len(p) <= len("[3 May 2023] ") + passages.SENTENCE_CHARS for p in g.passages)
        # the filler is the conversation's talk that is no question's evidence: no negative holds an evidence line
        assert not any(t[:40] in n for n in g.passages[1:] for t in evidence)
