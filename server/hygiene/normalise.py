"""Real-world text on write: exports carry Windows-1252 mojibake (C1 controls such as U+0096), zero-width
spaces, soft hyphens, BOMs and unnormalised Unicode. :func:`normalise_text` turns such text into clean NFC
text and says what it changed; only text that is mostly control characters (binary data) is refused.

Decisions: C1 controls U+0080–U+009F are read as the Windows-1252 byte they almost always are (U+0096 → "–",
U+0092 → "’"); the five bytes cp1252 leaves undefined are dropped. Zero-width space, word joiner, BOM,
soft hyphen and the other invisible format characters that carry no meaning in stored text are dropped;
ZWJ and ZWNJ stay (emoji sequences, Persian and Indic scripts need them). Other C0 controls are dropped;
newline, tab and carriage return stay. Noncharacters U+FFFE/U+FFFF and lone surrogates are dropped.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections import Counter

from server.domain import MemoryInput
from server.errors import InvalidArgument

_INVISIBLE = frozenset("\u200b\u2060\ufeff\u00ad\u180e\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                       "\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufff9\ufffa\ufffb")
_KEEP = frozenset("\n\t\r")
# A character normalise_text changes or counts: C0 controls but newline, tab and carriage return; DEL and the C1
# range; the invisible format characters; lone surrogates and the two noncharacters. A text with none of them is
# only NFC-normalised (a ~1 KB chat turn of several lines took ~300 us through the per-character loop).
_NEEDS_WORK = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + "".join(sorted(_INVISIBLE))
                         + "\ud800-\udfff\ufffe\uffff]")
# More than this share of control characters: not text that can be repaired (a binary blob).
BINARY_SHARE = 0.25


def _c1(ch: str) -> str:
    try:
        return bytes([ord(ch)]).decode("cp1252")
    except UnicodeDecodeError:
        return ""


def normalise_text(text: str) -> tuple[str, str, float]:
    """``(clean text, what changed, share of control characters)``; "what changed" is empty when nothing
    did, else e.g. ``"NFC; replaced 1 C1 (U+0096); dropped 2 zero-width/format"``."""
    if text.isascii() and text.isprintable():
        return text, "", 0.0
    if _NEEDS_WORK.search(text) is None:
        nfc = text if text.isascii() else unicodedata.normalize("NFC", text)
        return nfc, "NFC" if nfc != text else "", 0.0
    return _by_character(text)


def _by_character(text: str) -> tuple[str, str, float]:
    """:func:`normalise_text` read one character at a time: what its quick paths must agree with."""
    counts: Counter[str] = Counter()
    c1: list[str] = []
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if ch in _KEEP:
            out.append(ch)
        elif 0x80 <= code <= 0x9F:
            c1.append(f"U+{code:04X}")
            repl = _c1(ch)
            counts["replaced C1" if repl else "dropped C1"] += 1
            out.append(repl)
        elif ch in _INVISIBLE:
            counts["dropped zero-width/format"] += 1
        elif code < 0x20 or code == 0x7F:
            counts["dropped control"] += 1
        elif 0xD800 <= code <= 0xDFFF or ch in "\ufffe\uffff":
            counts["dropped non-character"] += 1
        else:
            out.append(ch)
    joined = "".join(out)
    nfc = unicodedata.normalize("NFC", joined)
    notes = ["NFC"] if nfc != joined else []
    for what in ("replaced C1", "dropped C1", "dropped zero-width/format", "dropped control", "dropped non-character"):
        if counts[what]:
            detail = f" ({', '.join(sorted(set(c1))[:5])})" if what == "replaced C1" else ""
            notes.append(f"{what} {counts[what]}{detail}")
    controls = counts["dropped control"] + counts["dropped non-character"]
    return nfc, "; ".join(notes), controls / max(1, len(text))


def normalise_input(m: MemoryInput, *, where: str) -> MemoryInput:
    """``m`` with its content and context normalised and ``normalized`` saying what changed; an
    InvalidArgument naming the field when one of them is binary data rather than text."""
    notes = []
    fields = {}
    for name in ("content", "context"):
        text, changed, controls = normalise_text(getattr(m, name))
        if controls > BINARY_SHARE:
            raise InvalidArgument(f"{where}.{name} is not text: {controls:.0%} of its characters are control "
                                  "characters")
        if changed:
            fields[name] = text
            notes.append(changed if name == "content" else f"context: {changed}")
    if not fields:
        return m
    return dataclasses.replace(m, **fields, normalized="; ".join(notes))
