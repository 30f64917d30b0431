"""Pure text rules the whole server shares: the one CJK check, code-like tokens, and the text a memory is
indexed under (BM25 and embedding). No I/O, no Java, no models.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from server.domain import Memory, MemoryType

# Han (BMP, Ext A, compatibility, Ext B..), kana (incl. halfwidth), Hangul jamo and syllables.
CJK_CHARS = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
             "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f")
_CJK_RE = re.compile(f"[{CJK_CHARS}]")

# Letters/digits joined by - _ . / (ASCII only: a Han character ends a code), with a digit and no
# run of more than 5 letters: "XJ-2026-0421", "v1.2.3", "TDP-43" are codes; "anti-interleukin-2",
# "0-dimensional" are hyphenated words.
_CODE_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:[-_./][A-Za-z0-9]+)+(?![A-Za-z0-9])")
_DIGIT_RE = re.compile(r"[0-9]")
_WORD_RE = re.compile(r"[A-Za-z]{6,}")


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains a Chinese, Japanese or Korean character (the server's one check: BM25
    field routing, dense weight, rerank routing and the context block's shingles all use it)."""
    return _CJK_RE.search(text) is not None


def is_cjk_char(ch: str) -> bool:
    return _CJK_RE.match(ch) is not None


def code_tokens(text: str) -> list[str]:
    """Code-like tokens of ``text``, lowercased, in order: ``"No. XJ-2026-0421."`` → ``["xj-2026-0421"]``."""
    return [m.lower() for m in _CODE_RE.findall(text) if _DIGIT_RE.search(m) and not _WORD_RE.search(m)]


def has_code(text: str) -> bool:
    """Whether ``text`` names a code-like token (see :func:`code_tokens`)."""
    return bool(code_tokens(text))


def readable_date(ms: int) -> str:
    """``8 May 2023`` (UTC): the form that embedders and BM25 both read well."""
    t = time.gmtime(ms / 1000.0)
    return f"{t.tm_mday} {time.strftime('%B %Y', t)}"


def indexed_text(content: str, *, dated: bool, created_at_ms: int, entities: Sequence[str] = (),
                 context: str = "") -> str:
    """What a memory is indexed under (and what the cross-encoder reads): a header of its own fields —
    the date for events (``dated``: episodic memories), the entities its content does not name — then its content, then its
    ``context`` (e.g. the previous turn; last, so a length cut takes context before content):
    ``[8 May 2023] (caroline) Caroline: I went to a support group.\ncontext: Melanie: How was your week?``.
    Only the content is ever returned; the header is rebuilt from the fields on every re-index."""
    header = []
    if dated and created_at_ms > 0:
        header.append(f"[{readable_date(created_at_ms)}]")
    folded = content.casefold()
    unnamed = [e for e in entities if e.casefold() not in folded]   # naming one twice would inflate its BM25 tf
    if unnamed:
        header.append(f"({', '.join(unnamed)})")
    text = " ".join([*header, content])
    return f"{text}{CONTEXT_MARK}{context.strip()}" if context.strip() else text


CONTEXT_MARK = "\ncontext: "


def without_context(text: str) -> str:
    """The header and content of an :func:`indexed_text` (what a memory's passage vectors read: its context is
    another memory's content, embedded there): the text before its last context mark."""
    return text.rpartition(CONTEXT_MARK)[0] if CONTEXT_MARK in text else text


def memory_text(m: Memory) -> str:
    """:func:`indexed_text` of a stored memory."""
    return indexed_text(m.content, dated=m.type == MemoryType.EPISODIC, created_at_ms=m.created_at_ms,
                        entities=m.entities, context=m.context)
