"""The salience cues' fast path (server/hygiene/salience.py ``_Cue``) answers exactly as its regex: every
alternative of every cue in contexts that do and do not make a whole word of it, in several cases, and random
texts built from the alternatives, the small-talk words and punctuation."""

from __future__ import annotations

import random

import pytest

from benchmarks.ingest.texts import synthetic_lines
from server.hygiene.salience import _CUES, _RUN, features, load_salience


def found(cue, text: str) -> bool:  # type: ignore[no-untyped-def]
    low = text.lower() if text.isascii() else ""
    return cue.found(text, low, frozenset(_RUN.findall(low)))


def alternatives() -> list[str]:
    out = []
    for cue in _CUES:
        out += [*cue.words, *cue.others]
    return out


@pytest.mark.parametrize("cue", _CUES, ids=lambda c: c.pattern.pattern[4:20])
def test_each_alternative_in_and_out_of_a_word(cue) -> None:  # type: ignore[no-untyped-def]
    for alt in [*cue.words, *cue.others]:
        for form in (alt, alt.upper(), alt.capitalize(), alt.swapcase()):
            for before, after in (("", ""), (" ", "."), ("x", ""), ("", "s"), ("_", " "), ("3", " "), ("'", "'"),
                                  ("-", "-"), ("re", "d"), ("I ", "ing"), ("é", " "), ("“", "”")):
                text = f"we said {before}{form}{after} today"
                assert found(cue, text) == bool(cue.pattern.search(text)), (cue.pattern.pattern, text)


def test_random_texts_match_the_regexes() -> None:
    rng = random.Random(7)
    pieces = alternatives() + ["hello", "thanks", "ok", "the", "a", "Anna", "2024", "x1", "_", "’", "?", "!",
                               ",", "-", "'", "我", "喜欢", "São"]
    for _ in range(4000):
        words = [rng.choice(pieces) for _ in range(rng.randint(1, 12))]
        text = "".join(w + rng.choice(("", " ", " ", ". ", "-", "'")) for w in words)
        text = "".join(c.upper() if rng.random() < 0.2 else c for c in text)
        for cue in _CUES:
            assert found(cue, text) == bool(cue.pattern.search(text)), (cue.pattern.pattern, text)


def test_the_scores_of_chat_turns_are_those_of_the_regexes() -> None:
    """The model's features of real-shaped turns, against the same features with every cue by its regex."""
    model = load_salience()
    for line in [t for conv in synthetic_lines(conversations=5) for t in conv]:
        said = line.partition(": ")[2]
        expected = [float(bool(c.pattern.search(said))) for c in _CUES]
        assert features(line)[5:10] == expected
        assert 0.0 <= model.score(line) <= 1.0
