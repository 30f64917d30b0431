"""Sibling statements at search time: the newest of a set that the query cannot tell apart answers for the set.

A user says "Took the kids to the science museum" in May and "Took the kids to the aquarium" in December, or
"My landlord is Mr. Patel" and later "The flat was sold; the new landlord is Ms. Greene"; asked "where did I take
the kids?" or "who is my landlord?" without a time word, the answer is the latest. Write-time update links
(server/engine/updates.py) catch a changed attribute when the evidence is strong; repeated events ("two dinners
are both true") and changes worded apart are never linked, and the query decides which of them it is about.

Among a query's most relevant candidates (:data:`TOP_N`), two short statements are *siblings* when:

* they are about the same subject: the same speaker (``"Name: …"`` turns), the same people named by relation,
  the same scope and type family (updates.py's rules), neither is a question nor longer than
  ``updates.MAX_WORDS`` words, neither is linked already (a chain answers for itself);
* the query matches them with the same words (English words, Chinese bigrams and characters, as
  ``updates.content_words`` reads them), at least one: what the query asks about is the part they share, and
  what tells them apart is a value the query does not name;
* they are not the same text (a restatement has no newer value);
* one of them is the newest: a set whose newest members were written at the same time (one session's turns,
  one import) has no answer by age and is left alone.

The newest member of each set of siblings ranks with the best relevance in the set (its factor lifts its own to
that); nothing is demoted, so an older sibling stays where it was and recall in a top k moves by at most one
rank per set. Only for queries with no time intent or a CURRENT one; a query that asks for the past or the
first state is left to the links and ``time_intent.FIRST_AGE_BOOST``. Pure functions; no model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from server.domain import Memory, TimeIntent
from server.engine import updates
from server.groups import components
from server.text import CJK_CHARS, has_cjk

TOP_N = 10   # the candidates (by relevance) that may form sets: a sibling must already be among the relevant


@dataclass(frozen=True, slots=True)
class _Statement:
    key: tuple[object, ...]      # what a sibling must share: subject, scope, family, the query's matched words
    words: frozenset[str]


def _statement(memory: Memory, query_words: frozenset[str]) -> _Statement | None:
    speaker, body = updates.split_speaker(memory.content)
    if "?" in body or "？" in body or len(body.split()) > updates.MAX_WORDS:
        return None
    words = updates.content_words(body)
    matched = words & query_words
    if not matched:
        return None
    return _Statement(key=(speaker, updates.relations(body), memory.scope, updates.family(memory.type),
                           frozenset(matched)), words=words)


def sibling_sets(query: str, memory_at: Callable[[int], Memory | None], relevance: np.ndarray, *,
                  top_n: int = TOP_N) -> list[list[int]]:
    """The sets of sibling candidates (positions into ``relevance``, oldest first), each of two or more;
    ``memory_at(i)`` is candidate i's memory, None for one that may not join (purged, or linked already)."""
    query_words = updates.content_words(query)
    if not query_words:
        return []
    order = np.argsort(-np.asarray(relevance, dtype=np.float64), kind="stable")[:top_n]
    groups: dict[tuple[object, ...], list[tuple[int, int, frozenset[str]]]] = {}
    for i in order.tolist():
        m = memory_at(i)
        st = None if m is None else _statement(m, query_words)
        if st is not None and m is not None:
            groups.setdefault(st.key, []).append((m.created_at_ms, i, st.words))
    sets = []
    for members in groups.values():
        members.sort()
        if len({w for _, _, w in members}) >= 2 and members[-1][0] > members[-2][0]:
            sets.append([i for _, i, _ in members])
    return sets   # one statement or restatements of it, or no single newest member (written at once): no set


def sibling_factor(query: str, intent: TimeIntent, memory_at: Callable[[int], Memory | None],
                   relevance: np.ndarray, *, top_n: int = TOP_N) -> np.ndarray:
    """Each candidate's sibling factor: the newest member of a set × (best relevance in the set / its own), every
    other candidate 1. All ones for a PAST or FIRST intent."""
    rel = np.asarray(relevance, dtype=np.float64)
    out = np.ones(len(rel))
    if intent not in (TimeIntent.NONE, TimeIntent.CURRENT):
        return out
    for members in sibling_sets(query, memory_at, rel, top_n=top_n):
        newest = members[-1]
        best = max(float(rel[j]) for j in members)
        out[newest] = max(1.0, best / max(float(rel[newest]), 1e-9))
    return out


# -- Newest first: the same attribute of the same subject, ordered by age inside the slots it already holds --------
#
# The lift above moves a newer sibling up past other memories. This rule moves nothing in or out of a query's top
# SLOTS hits: statements there that describe the same attribute of the same subject swap places so that the newest
# takes the best slot of its group, the next newest the next, and so on. recall@k for any k >= SLOTS is unchanged by
# construction (LoCoMo recall@10; SciFact abstracts are longer than a statement and never join); only the order
# inside a group changes. The evidence of "the same attribute" is the query matching both statements with the same
# words, less the words most of the top statements hold (their common subject: "the user", "用户"). The statements'
# own e5 cosine was measured as evidence and does not separate (docs/concepts/updates.md): unrelated Chinese
# statements sit at 0.92-0.96 ("我去泰山爬山了" / "我们一起看了《满江红》" 0.96), the true pairs at 0.94-0.95; so
# PAIR_COSINE is None (not read) and a pair of vectors is an option a caller may still pass.

SLOTS = 5
PAIR_COSINE: float | None = None
# With PAIR_COSINE set: the cosine is evidence only where the newer statement names a change (updates.names_change).
PAIR_NEEDS_CHANGE = False
SINGLE_CJK = False     # Chinese single characters are no evidence (only character bigrams are)
ENTITIES = True
COMMON_SHARE = 2       # a word more than SLOTS / COMMON_SHARE statements hold is their subject, not the attribute
# Two statements describe the same attribute when the query words they hold overlap this much (Jaccard): "what
# editor do I code in?" holds {code, editor} of "My code editor is VS Code" and {editor} of "I moved over to Zed as
# my editor" (0.5). 1.0 asked for the same words (recency dev 0.800 either way; the second dev set 0.711 → 0.756).
MATCH_JACCARD = 1.0
# Or when the newer statement holds every query word the older one does (and more): "我最喜欢哪个歌手？" holds
# {喜欢, 歌手} of "我喜欢的歌手是陈奕迅" and {最喜, 喜欢, 歌手} of the newer "现在最喜欢的歌手是毛不易". Not the other way:
# "what's my blood type?" holds {blood, type} of "My blood type is O negative" and {blood} of the newer "Donated
# blood at the town hall", which names another attribute.
NEWER_SUPERSET = True
# The top hits that may not join a group (linked, a question, a narrative) count towards a word's share too.
HITS_COUNT = True
# Which of the words most top hits hold are their common subject: the words agents write as the subject of every
# memory ("The user is vegetarian", "用户喜欢…"), the names the query writes with a capital, and a word that stands
# first, with a capital (a name as a statement's subject: "Alice is allergic…", "Alice moved…"), in most of the hits
# that hold it; not any word: an attribute word the search found them all by ("work" in "how do I get to work?",
# "alarm" in "My alarm is set for 6:30") stays, and groups them. None: any such word (the rule before;
# recency_rules compares both).
SUBJECT_WORDS: frozenset[str] | None = frozenset({"user", "human", "customer", "client", "patient", "member", "用户",
                                                   "客户", "顾客", "患者"})
_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")


def _subject(memory: Memory) -> tuple[object, ...] | None:
    """What two grouped statements must share (speaker, people named by relation, scope, type family), or None for a
    memory that cannot join: a question, a narrative (longer than ``updates.MAX_WORDS`` words), or linked already
    (a chain answers for itself through the update factor)."""
    if memory.updates or memory.updated_by:
        return None
    speaker, body = updates.split_speaker(memory.content)
    if "?" in body or "？" in body or statement_words(body) > updates.MAX_WORDS:
        return None
    return (speaker, updates.relations(body), memory.scope, updates.family(memory.type))


def joinable(memory: Memory) -> bool:
    """Whether a memory can join a group at all (a short statement, not linked)."""
    return _subject(memory) is not None


def statement_words(text: str) -> int:
    """Words of a text for the statement rule: space-separated words, each CJK character counting as one (a
    Chinese text has no spaces: a paragraph would otherwise count as one word)."""
    return len(_CJK_RUN.sub(" ", text).split()) + sum(len(run) for run in _CJK_RUN.findall(text))


def same_attribute(a: Memory, b: Memory, words_a: frozenset[str], words_b: frozenset[str], *,
                   cosine: float | None = None, min_cosine: float | None = PAIR_COSINE) -> bool:
    """Whether two statements of one subject describe the same attribute: the query matching both with much the same
    words (``words_a``, ``words_b``: :func:`matched_words`; Jaccard ≥ :data:`MATCH_JACCARD`), or, when
    ``min_cosine`` is set, their own embeddings
    at least that close (more for Chinese: ``updates.LINK_COSINE_CJK_SHIFT``)."""
    if a.content.strip() == b.content.strip():
        return False   # a restatement: no newer value
    if words_a and words_b and len(words_a & words_b) >= MATCH_JACCARD * len(words_a | words_b):
        return True
    if NEWER_SUPERSET and words_a and words_b and a.created_at_ms != b.created_at_ms:
        older, newer = (words_a, words_b) if a.created_at_ms < b.created_at_ms else (words_b, words_a)
        if older < newer:
            return True
    if cosine is None or min_cosine is None:
        return False
    if PAIR_NEEDS_CHANGE:
        newer = a if a.created_at_ms > b.created_at_ms else b
        if a.created_at_ms == b.created_at_ms or not updates.names_change(newer.content):
            return False
    shift = updates.LINK_COSINE_CJK_SHIFT if has_cjk(a.content) or has_cjk(b.content) else 0.0
    return cosine >= min_cosine + shift


def matched_words(query: str, statements: Sequence[str | None], *, single_cjk: bool = SINGLE_CJK,
                  others: Sequence[str] = ()) -> list[frozenset[str]]:
    """The query words each statement holds (``updates.content_words``; Chinese character bigrams, and single
    characters only with ``single_cjk``; None: a hit that cannot join), less the ones more than SLOTS / COMMON_SHARE
    of them hold (3 of the top 5): a word most top statements share is their common subject ("the user", "用户"),
    not the attribute the query asks about. ``others``: the texts of the top hits that may not join (linked, a
    question, a narrative); with :data:`HITS_COUNT` their query words count towards that share too."""
    query_words = updates.content_words(query)

    def held(text: str) -> frozenset[str]:
        return updates.content_words(updates.split_speaker(text)[1]) & query_words

    out = []
    for text in statements:
        words = frozenset() if text is None else held(text)
        out.append(words if single_cjk else frozenset(w for w in words if len(w) > 1 or not has_cjk(w)))
    counts: dict[str, int] = {}
    for words in out:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
    # Where fewer hits are counted than the share needs (two), a word every one of them holds is as much their
    # subject: "what food does the user eat?" over "The user is vegetarian" and "The user asked about train times"
    # matches both in "user" only, and must not make the newer one the answer.
    counted = sum(1 for text in statements if text is not None)
    if HITS_COUNT:   # the query words of the hits that may not join count too: a subject is what most hits hold
        for text in others:
            for w in held(text):
                counts[w] = counts.get(w, 0) + 1
        counted += len(others)
    need = min(SLOTS // COMMON_SHARE + 1, counted)
    holders = [t for t in (*statements, *(others if HITS_COUNT else ())) if t is not None]
    common = frozenset(w for w, c in counts.items() if c >= need and _subject_word(w, query, holders))
    return [w - common for w in out]


def _subject_word(word: str, query: str, texts: Sequence[str]) -> bool:
    """Whether a word most top hits hold may be their common subject (:data:`SUBJECT_WORDS`): one of those words, a
    name the query capitalises, or the first content word of most of the ``texts`` that hold it, written with a capital
    there ("Alice moved …"; "My alarm is set …" names an attribute of the speaker, its subject)."""
    if SUBJECT_WORDS is None or word in SUBJECT_WORDS:
        return True
    if any(w[:1].isupper() and word in updates.content_words(w) for w in query.split()[1:]):
        return True
    bodies = [updates.split_speaker(t)[1] for t in texts]
    holding = [b for b in bodies if word in updates.content_words(b)]
    return 2 * sum(updates.first_content_word(b) == (word, True) for b in holding) > len(holding)


def newest_first(query: str, intent: TimeIntent, memories: Sequence[Memory | None], vectors: np.ndarray | None = None,
                 *, min_cosine: float | None = PAIR_COSINE, single_cjk: bool = SINGLE_CJK) -> list[int]:
    """The order of a query's top hits (``memories``, best first; None: may not move) after the rule: a permutation
    of ``range(len(memories))`` where groups of statements about the same attribute of the same subject hold the
    same slots as before, newest first (equal ages keep their order). ``vectors``: the hits' unit embeddings, row by
    row, read only with ``min_cosine``. The identity for a PAST or FIRST intent (the links and the age boost answer
    those)."""
    n = len(memories)
    order = list(range(n))
    if intent not in (TimeIntent.NONE, TimeIntent.CURRENT) or n < 2:
        return order
    subjects = [None if m is None else _subject(m) for m in memories]
    texts = [m.content if m is not None and subjects[i] is not None else None for i, m in enumerate(memories)]
    others = [m.content for m, t in zip(memories, texts, strict=True) if m is not None and t is None]
    words = matched_words(query, texts, single_cjk=single_cjk, others=others)
    cos = None
    if min_cosine is not None and vectors is not None:
        v = np.asarray(vectors, dtype=np.float64)
        cos = v @ v.T

    def linked(i: int, j: int) -> bool:
        a, b = memories[i], memories[j]
        return (a is not None and b is not None and subjects[i] is not None and subjects[i] == subjects[j]
                and (not ENTITIES or not (a.entities and b.entities and set(a.entities) != set(b.entities)))
                and same_attribute(a, b, words[i], words[j], cosine=None if cos is None else float(cos[i, j]),
                                   min_cosine=min_cosine))

    for members in components(n, ((i, j) for i in range(n) for j in range(i + 1, n) if linked(i, j))):
        if len(members) < 2:
            continue
        by_age = sorted(members, key=lambda i: (-memories[i].created_at_ms, i))  # type: ignore[union-attr]
        for slot, i in zip(members, by_age, strict=True):
            order[slot] = i
    return order
