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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from server.domain import Memory, TimeIntent
from server.engine import updates

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
