"""LoCoMo questions as the user would ask them (benchmarks/quality/roles.py)."""

from __future__ import annotations

import pytest

from benchmarks.quality.roles import first_person_question


@pytest.mark.parametrize(("name", "asked", "as_the_user"), [
    ("Caroline", "What did Caroline research?", "What did I research?"),
    ("Joanna", "What was Joanna's audition for?", "What was my audition for?"),
    ("Nate", "How many tournaments has Nate won?", "How many tournaments have I won?"),
    ("Tim", "When is Tim attending a book conference?", "When am I attending a book conference?"),
    ("Nate", "Does Nate feel he could do it?", "Do I feel I could do it?"),
    ("John", "What inspired John to join the march?", "What inspired me to join the march?"),
    ("Melanie", "What did Melanie paint for her kids?", "What did I paint for my kids?"),
    ("Caroline", "Caroline went where after the parade?", "I went where after the parade?"),
    ("Caroline", "What did Caroline give to Melanie?", "What did I give to Melanie?"),   # another name stays
])
def test_a_question_about_a_speaker_in_the_first_person(name: str, asked: str, as_the_user: str) -> None:
    assert first_person_question(asked, name) == as_the_user
