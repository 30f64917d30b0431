"""What the cross-encoder reads of a long memory: its best passage for the query, not its first tokens.

Long chat turns (an assistant's 1–3 KB answer) are common, and the cross-encoder reads a (query, memory) pair cut to
its window (256 tokens: about the first 800 characters of English beside a short question); evidence deep in such a
turn was never read. :func:`rerank_text` gives the cross-encoder, for a memory whose content is longer than
``PASSAGE_CHARS``, the memory's header (date, unnamed entities) and the window of its content that shares the most
of the query's words, function words ("what", "did", "the") not counted (overlapping windows every
``PASSAGE_STRIDE`` characters, cut at word boundaries: the windows BM25 indexes too, server/lexical/windows.py; ties:
the earliest) when that window holds at least ``PASSAGE_MARGIN`` more of them than the first window, else the first
window; the window is ``TURN_WINDOW`` (400) characters for an episodic memory (a chat turn), ``PASSAGE_WINDOW`` (800)
for any other (a document, a fact). A long chat turn is read by :func:`rerank_texts` as ``TURN_SENTENCES`` (3) of its
sentence units instead (:func:`sentence_units`), its logit the best of theirs. A short memory reads exactly as before
(:func:`~server.text.memory_text`). One function for every place that builds a rerank pair: the rerank stage and the
rerank cost model count the same text.
Pure; no model runs here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from server.domain import Memory, MemoryType
from server.engine.updates import split_speaker
from server.lexical.windows import passages
from server.text import indexed_text, is_cjk_char, memory_text

PASSAGE_CHARS = 800     # about what the cross-encoder's 256-token window holds beside a short question
PASSAGE_WINDOW = PASSAGE_CHARS   # the window read of a longer content (windows start every half window)
# The window read of a long EPISODIC memory (a chat turn, an event): the answer in a turn is a sentence or two, and the
# cross-encoder, trained on short turns, reads it best with little around it. Chosen on the dev long turns
# (benchmarks/quality/long_turns.py: R@10 0.525 -> 0.585, block 0.365 -> 0.478 at 400; 600 fell between 800 and 400
# with 64- and 128-token passage vectors); SciFact abstracts (SEMANTIC) lost nDCG@10 0.005 at 400, so they keep 800.
TURN_WINDOW = 400
PASSAGE_STRIDE = 400    # windows overlap by half, so a sentence cut by one lies whole in the next
PASSAGE_MARGIN = 1      # a later window is read only when it holds this many more query terms than the first
# Windows of a long EPISODIC memory the cross-encoder reads, the memory's logit the best of them (1: the one window
# best_window picks, the default). A question shares few words with the sentence of a chat turn that answers it: on the
# dev ~1 KB turns best_window's window held the evidence for 46 % of the long evidence turns, yet reading 3 or 8
# windows moved dev R@10 by -0.008 to +0.018 (R@5 +0.009 to +0.037) at 3-4x the block search's time
# (docs/concepts/retrieval.md "Reading several windows of a turn"): measured, not the default.
TURN_READS = 1
TURN_READ_CONTEXT = True   # whether each window read carries the memory's context (the turn before it), as one read does
_WORD = re.compile(r"\w+", re.UNICODE)
# English function words of three letters or more: a question shares them with any stretch of talk ("What did …",
# "… the …"), so they say nothing about which window holds its answer. A window is chosen by the other words.
FUNCTION_WORDS = frozenset("""
the and for are but not you your yours all any can had has have having her hers him his how its our ours out she
that their theirs them then there these they this those was were what when where which while who whom whose why
will with would could should shall might must did does doing done been being into onto from about above after again
against also because before below between both down during each few further here itself just more most myself nor
off once only other over own same some such than too under until very yourself yourselves himself herself
themselves ourselves upon via per yet
""".split())
# Whether a long chat turn's window is the one that holds its passage vector closest to the query (the write stage's
# narrow windows, advanced.turn_passage_tokens) where the turn has them, instead of best_window's words. On the dev
# ~1 KB turns that window held the evidence line for 97 % of the long evidence turns (78 % with other turns of the
# conversation around the line) against 69 % (51 %) by words, yet end to end recall fell: R@10 0.754 -> 0.738, block
# 0.644 -> 0.641 (0.604 -> 0.597, 0.516 -> 0.514): the distractors' closest windows read as well as the evidence's
# (docs/concepts/retrieval.md "The cross-encoder's window at the closest passage vector"). Measured, not the default.
DENSE_FOCUS = False
# Sentence reads of a long chat turn (content past PASSAGE_CHARS, EPISODIC): the cross-encoder reads TURN_SENTENCES of
# its sentence units (:func:`sentence_units`: a sentence and those after it up to SENTENCE_CHARS characters), the one
# the query's words pick first (or the one at the passage vector closest to the query, with DENSE_FOCUS), then the
# others by the query terms they hold; -1 reads every unit, 0 the TURN_WINDOW window(s) as before. The memory's logit
# is the best of them. The cross-encoder, trained on short turns, scores a line far lower with talk around it: on the
# dev ~1 KB turns an evidence line alone read a mean logit of -3.4, inside a 400-character window -7.3, with 60
# characters of talk each side -5.7. Chosen on the dev ~1 KB turns (docs/concepts/retrieval.md "Sentence reads of a
# long turn"): 3 units without the memory's context (SENTENCE_CONTEXT) lifted R@10 / R@5 / block 0.757 / 0.640 /
# 0.640 -> 0.768 / 0.675 / 0.671 for a block search p50 of 243 -> 328 ms; 1 unit fell to 0.681, 5 read 0.764 / 0.672
# / 0.646, with the context 0.770 / 0.679 / 0.674 at 413 ms.
TURN_SENTENCES = 3
SENTENCE_CONTEXT = False
# Whether the units read after the first are taken apart from those already taken (no character in common) before any
# that overlaps one: a unit starts at every sentence, so the next best by the query's words is often the first one's
# neighbour, most of it the same text. Measured, not the default: dev ~1 KB turns R@10 / R@5 / block 0.768 / 0.675 /
# 0.671 -> 0.759 / 0.652 / 0.649 (docs/concepts/retrieval.md "Units apart"): the overlap is what reaches a cut line.
UNITS_APART = False
# Whether each sentence unit of a long turn whose content starts with a speaker ("user: …", "Caroline: …") reads
# with that label before it, as the turn's first unit and every short turn do: a unit from the middle of a user's
# long turn otherwise reads as nobody's words. Measured, not the default: the roles suite's dev ~1 KB turns R@10 / R@5 /
# block 0.810 / 0.727 / 0.725 -> 0.815 / 0.729 / 0.728, its temporal block 0.909 -> 0.898 (docs/concepts/retrieval.md
# "Units with the speaker").
UNIT_SPEAKER = False
SENTENCE_CHARS = 200
MAX_UNITS = 64   # a turn of more units (over ~10 KB, or a text of tiny sentences) reads its windows, as before
_CJK_STOPS = "\u3002\uff01\uff1f"   # a Chinese full stop, exclamation and question mark: no space after them
_SENTENCE_END = re.compile(rf"(?<=[.!?])\s+|(?<=[{_CJK_STOPS}])\s*|\n+")
SKIP_FUNCTION_WORDS = True   # off: every word of three letters or more counts, as before (kept for measurement)


def terms(text: str) -> frozenset[str]:
    """Casefolded words of three or more characters that are not :data:`FUNCTION_WORDS`, and each pair of adjacent
    CJK characters."""
    return _terms(text, SKIP_FUNCTION_WORDS)


# A query's candidates are read again for every query that finds them, and by the rerank cost model before the
# rerank stage: a turn's units and each unit's words are computed once (pure functions of the text, so a cache). A
# search reads ~60-250 texts; an entry holds ~2 KB (a unit's words, the unit included) to ~6 KB (an 800-character
# window's): the caches stay under ~15 MB.
TEXT_CACHE = 2048


@functools.lru_cache(maxsize=TEXT_CACHE)
def _terms(text: str, skip: bool) -> frozenset[str]:
    out: set[str] = set()
    for word in _WORD.findall(text.casefold()):
        if not word.isascii() and all(is_cjk_char(c) for c in word):
            out.update(word[i:i + 2] for i in range(max(1, len(word) - 1)))
        elif len(word) >= 3 and not (skip and word in FUNCTION_WORDS):
            out.add(word)
    return frozenset(out)


def _hits(query: str, windows: Sequence[str]) -> list[int]:
    """The distinct query terms each window holds."""
    wanted = terms(query)
    return [len(wanted & terms(window)) for window in windows]


def _best(hits: Sequence[int], margin: int | None) -> int:
    margin = max(1, PASSAGE_MARGIN if margin is None else margin)
    best = max(range(len(hits)), key=lambda i: (hits[i], -i))
    return best if hits[best] >= hits[0] + margin else 0


def best_window(query: str, windows: list[str], *, margin: int | None = None) -> int:
    """Index of the window that holds the most distinct query terms (ties: the earliest) when it holds at least
    ``margin`` (``PASSAGE_MARGIN``, at least 1) more than the first window; else 0."""
    if len(windows) <= 1:
        return 0
    return _best(_hits(query, windows), margin)


def best_passage(query: str, text: str, *, size: int = PASSAGE_CHARS, margin: int | None = None) -> str:
    """The window of ``text`` (:func:`passages`) that :func:`best_window` picks."""
    windows = passages(text, size=size, stride=size // 2)
    return windows[best_window(query, windows, margin=margin)]


def window_spans(text: str, windows: Sequence[str]) -> list[tuple[int, int]]:
    """Where each of ``windows`` (:func:`passages` of ``text``, in order) lies in ``text``, as ``(start, end)``."""
    spans, at = [], 0
    for window in windows:
        start = text.find(window, at)
        if start < 0:   # cannot happen for passages() of text; a window then reads as empty
            spans.append((0, 0))
            continue
        spans.append((start, start + len(window)))
        at = start + 1
    return spans


def focus_window(text: str, windows: Sequence[str], focus: tuple[int, int]) -> int:
    """Index of the window of ``text`` that holds the most of the character span ``focus`` (ties: the earliest)."""
    a, b = focus
    overlap = [max(0, min(b, end) - max(a, start)) for start, end in window_spans(text, windows)]
    return int(np.argmax(overlap)) if overlap else 0


def ranked_windows(query: str, windows: list[str], first: int | None = None) -> list[int]:
    """Indexes of ``windows`` in the order the cross-encoder reads them: ``first`` (else :func:`best_window`'s),
    then the others by the distinct query terms they hold (ties: the earliest)."""
    hits = _hits(query, windows)
    if first is None:
        first = _best(hits, None) if len(windows) > 1 else 0
    return [first, *sorted((i for i in range(len(windows)) if i != first), key=lambda i: (-hits[i], i))]


def sentence_units(text: str, size: int | None = None, *, limit: int = 0) -> list[str]:
    """``text``'s reading units: from each sentence on, it and the sentences after it while the unit stays within
    ``size`` (``SENTENCE_CHARS``) characters; a sentence longer than ``size`` is cut as :func:`passages` cuts. Each
    unit is a stretch of ``text`` as written (its own spaces and line breaks), none inside the one before it. With
    ``limit``, ``[]`` when there would be more than ``limit`` units (linear time either way)."""
    return list(_units(text, SENTENCE_CHARS if size is None else size, limit))


@functools.lru_cache(maxsize=TEXT_CACHE // 2)
def _units(text: str, size: int, limit: int) -> tuple[str, ...]:
    if limit and len(text) > limit * size:   # units cover the text, each within size: more than limit of them
        return ()
    pieces: list[tuple[int, int]] = []
    at = 0
    for bound in [*(m.span() for m in _SENTENCE_END.finditer(text)), (len(text), len(text))]:
        sentence = text[at:bound[0]]
        lead = len(sentence) - len(sentence.lstrip())
        sentence = sentence.strip()
        if sentence:
            first = at + lead
            if len(sentence) <= size:
                pieces.append((first, first + len(sentence)))
            else:
                pieces.extend((first + a, first + b) for a, b in window_spans(
                    sentence, passages(sentence, size=size, stride=size // 2)) if b > a)
        at = bound[1]
    units: list[tuple[int, int]] = []
    j = 0   # one past the last piece of the unit from piece i: it only moves forward as i does
    for i, (a, _) in enumerate(pieces):
        j = max(j, i + 1)
        while j < len(pieces) and pieces[j][1] - a <= size:
            j += 1
        b = pieces[j - 1][1]
        if not units or b > units[-1][1]:
            units.append((a, b))
            if limit and len(units) > limit:
                return ()
    return tuple(text[a:b] for a, b in units) or (text,)


def rerank_texts(query: str, memory: Memory, *, reads: int | None = None,
                 focus: tuple[int, int] | None = None) -> list[str]:
    """Every text the cross-encoder reads of ``memory`` for ``query``, its logit the best of theirs: a long EPISODIC
    memory's first ``TURN_SENTENCES`` sentence units (:func:`sentence_units` in :func:`ranked_windows`' order, the
    one holding most of ``focus`` first when given; each with the memory's header, its context only with
    ``SENTENCE_CONTEXT``); with ``TURN_SENTENCES`` 0 its first ``reads`` (``TURN_READS``) windows of ``TURN_WINDOW``
    characters (each with the header and context as :func:`rerank_text` builds them; ``focus`` as there); any other
    memory :func:`rerank_text` alone."""
    reads = TURN_READS if reads is None else reads
    long_turn = len(memory.content) > PASSAGE_CHARS and memory.type == MemoryType.EPISODIC
    units = sentence_units(memory.content, limit=MAX_UNITS) if long_turn and TURN_SENTENCES else []
    if units:
        first = None if focus is None else focus_window(memory.content, units, focus)
        order = ranked_windows(query, units, first)
        if UNITS_APART:
            order = _apart(order, window_spans(memory.content, units))
        take = len(order) if TURN_SENTENCES < 0 else TURN_SENTENCES
        chosen = [units[i] for i in order[:take]]
        if UNIT_SPEAKER:
            chosen = _labelled(memory.content, chosen)
        return _reads(memory, chosen, context=SENTENCE_CONTEXT)
    if not long_turn or reads <= 1:
        return [rerank_text(query, memory, focus=focus)]
    windows = passages(memory.content, size=TURN_WINDOW, stride=TURN_WINDOW // 2)
    first = None if focus is None else focus_window(memory.content, windows, focus)
    chosen = [windows[i] for i in ranked_windows(query, windows, first)[:reads]]
    return _reads(memory, chosen, context=TURN_READ_CONTEXT)


def _labelled(content: str, units: Sequence[str]) -> list[str]:
    """``units`` of ``content``, each that does not start the content with the content's speaker label before it
    (``"user: "``, ``"Caroline: "`` as written); the units as they are when the content names no speaker."""
    speaker, rest = split_speaker(content)
    if not speaker:
        return list(units)
    label = content[:len(content) - len(rest)].strip()
    label += "" if label.endswith("\uff1a") else " "   # a full-width colon takes no space after it
    return [u if content.startswith(u) else label + u for u in units]


def _apart(order: Sequence[int], spans: Sequence[tuple[int, int]]) -> list[int]:
    """``order`` with the units that share no character with any taken before them first (in ``order``'s order), then
    the others."""
    taken: list[int] = []
    for i in order:
        a, b = spans[i]
        if all(b <= spans[j][0] or a >= spans[j][1] for j in taken):
            taken.append(i)
    return taken + [i for i in order if i not in taken]


def _reads(memory: Memory, parts: Sequence[str], *, context: bool) -> list[str]:
    """Each part of a long turn's content as the cross-encoder reads it: the memory's header (its date, unnamed
    entities), the part, and the memory's context when ``context``."""
    return [indexed_text(part, dated=True, created_at_ms=memory.created_at_ms, entities=memory.entities,
                         context=memory.context if context else "") for part in parts]


def rerank_text(query: str, memory: Memory, *, window: int | None = None,
                focus: tuple[int, int] | None = None) -> str:
    """What the cross-encoder reads of ``memory`` for ``query``: :func:`~server.text.memory_text` when the content
    fits ``PASSAGE_CHARS``, else the same header and context around one passage of the content, of ``window``
    characters, else ``TURN_WINDOW`` for an episodic memory and ``PASSAGE_WINDOW`` for any other: the one that holds
    most of ``focus`` (a character span of the content: where the passage vector that matched the query best lies,
    :func:`dense_focus`) when given, else :func:`best_passage`'s."""
    if len(memory.content) <= PASSAGE_CHARS:
        return memory_text(memory)
    episodic = memory.type == MemoryType.EPISODIC
    size = window or (TURN_WINDOW if episodic else PASSAGE_WINDOW)
    if focus is None:
        chosen = best_passage(query, memory.content, size=size)
    else:
        windows = passages(memory.content, size=size, stride=size // 2)
        chosen = windows[focus_window(memory.content, windows, focus)]
    return indexed_text(chosen, dated=episodic, created_at_ms=memory.created_at_ms, entities=memory.entities,
                        context=memory.context)


def dense_focus(spans: Sequence[tuple[int, int]], passages_vectors: np.ndarray, query: np.ndarray,
                content_start: int) -> tuple[int, int] | None:
    """The character span of a memory's content that its passage vector closest to ``query`` reads: ``spans`` are
    the passage windows' spans in the text the embedder read (``Embedder.passage_spans``), ``passages_vectors``
    their vectors in the same order (the dense index's rows), ``content_start`` where the content begins in that
    text (after the embedding prefix and the header). None when they do not pair up."""
    if not len(spans) or len(spans) != len(passages_vectors):
        return None
    a, b = spans[int(np.argmax(np.asarray(passages_vectors, dtype=np.float32) @ np.asarray(query, np.float32)))]
    return max(0, a - content_start), max(0, b - content_start)
