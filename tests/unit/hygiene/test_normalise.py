from __future__ import annotations

import unicodedata

import pytest

from server.domain import MemoryInput
from server.errors import InvalidArgument
from server.hygiene.normalise import normalise_input, normalise_text


def test_clean_ascii_is_untouched() -> None:
    assert normalise_text("plain text\nwith a tab\there") == ("plain text\nwith a tab\there", "", 0.0)


def test_c1_mojibake_becomes_the_windows_1252_character() -> None:
    text, changed, _ = normalise_text("costs 5\x9610 dollars, it\x92s fine")
    assert text == "costs 5\u201310 dollars, it\u2019s fine"
    assert changed == "replaced C1 2 (U+0092, U+0096)"


def test_undefined_c1_bytes_are_dropped() -> None:
    text, changed, _ = normalise_text("a\x81b")
    assert text == "ab" and changed == "dropped C1 1"


def test_invisible_characters_dropped_but_zwj_and_newlines_kept() -> None:
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"
    text, changed, _ = normalise_text("\ufeffzero\u200bwidth soft\u00adhyphen\n" + family + "\ttab")
    assert text == "zerowidth softhyphen\n" + family + "\ttab"
    assert changed == "dropped zero-width/format 3"


def test_nfc_and_c0_controls() -> None:
    decomposed = "Cafe\u0301 \x00\x1b"
    text, changed, share = normalise_text(decomposed)
    assert text == "Café " and unicodedata.is_normalized("NFC", text)
    assert changed == "NFC; dropped control 2" and share == pytest.approx(2 / len(decomposed))


def test_input_records_what_changed_and_binary_is_refused() -> None:
    m = normalise_input(MemoryInput(content="a\x96b", context="\u200bprev"), where="memories[3]")
    assert (m.content, m.context) == ("a\u2013b", "prev")
    assert m.normalized == "replaced C1 1 (U+0096); context: dropped zero-width/format 1"
    same = MemoryInput(content="clean")
    assert normalise_input(same, where="m") is same
    with pytest.raises(InvalidArgument, match=r"memories\[3\]\.content is not text: 50%"):
        normalise_input(MemoryInput(content="\x00\x01\x02abc"), where="memories[3]")


def test_the_quick_paths_agree_with_reading_each_character() -> None:
    """Multi-line turns, accents to compose, and every kind of character the loop changes, alone and mixed: the
    quick paths (no such character: NFC alone) give what the per-character reading gives."""
    import random

    from server.hygiene.normalise import _by_character

    alphabet = [chr(c) for c in range(0, 0x250)] + list("\u200b\u2060\ufeff\u00ad\u200d\u200c\ud800\udfff\ufffe"
                                                       "\uffff\u0301e\u4e2d\u6587\uff1f\U0001F600\n\t\r ")
    rnd = random.Random(7)
    texts = ["user: I moved.\nassistant: Where to?\n\tThe 3rd floor.", "Cafe\u0301 au lait", "caf\u00e9\r\n",
             "line one\nline two", "zero\u200bwidth", "\x96dash", "soft\u00adhyphen", "中文\n第二行"]
    texts += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 16))) for _ in range(20000)]
    for text in texts:
        assert normalise_text(text) == _by_character(text), repr(text)
    assert normalise_text("Cafe\u0301\nau lait") == ("Caf\u00e9\nau lait", "NFC", 0.0)
    assert normalise_text("line one\nline two") == ("line one\nline two", "", 0.0)
