"""The control-character check of validation (server/engine/validation.py): its regexes refuse exactly what the
Unicode categories do, for every code point, with and without newlines allowed."""

from __future__ import annotations

import random
import unicodedata

import pytest

from server.engine.validation import _bad_chars


def _bad_chars_by_category(text: str, *, allow_newlines: bool) -> bool:
    """The definition: a control character (Cc), a surrogate (Cs) or U+FFFE/U+FFFF; newlines and tabs if allowed."""
    for ch in text:
        if ch in "\n\r\t" and allow_newlines:
            continue
        if unicodedata.category(ch) in ("Cc", "Cs") or ch in "\ufffe\uffff":
            return True
    return False


@pytest.mark.parametrize("allow_newlines", [True, False])
def test_every_code_point_is_judged_as_by_its_category(allow_newlines: bool) -> None:
    wrong = [cp for cp in range(0x110000)
             if _bad_chars(chr(cp), allow_newlines=allow_newlines)
             != _bad_chars_by_category(chr(cp), allow_newlines=allow_newlines)]
    assert wrong == []


def test_texts_with_a_bad_character_anywhere_are_refused() -> None:
    rng = random.Random(5)
    for _ in range(500):
        text = "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff), 0x0a, 0x09, 0x00, 0x85,
                                       0xd800, 0xfffe, 0x1f600])) for _ in range(rng.randint(0, 30)))
        for allow in (True, False):
            assert _bad_chars(text, allow_newlines=allow) == _bad_chars_by_category(text, allow_newlines=allow), text
