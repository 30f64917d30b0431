"""Time intent in a query: does it ask for the current state, an earlier one, the first one, or neither?

``detect(text)`` reads cue words, English and Chinese, and returns a :class:`TimeIntent`:

* CURRENT — "now", "currently", "these days", "at the moment", "latest", "any more", "现在", "目前",
  "最近", "如今": the recency factor of that query is raised (README "Ranking"; docs/concepts/updates.md).
* PAST — "before", "used to", "previously", "formerly", "earlier", "in the past", "my ex", "以前", "原来", "之前",
  "过去", "前女友":
  a memory that a newer one updates is preferred to the newer one.
* FIRST — "first", "originally", "at first", "initially", "to begin with", "最初", "一开始", "起初", "第一":
  the oldest state of a chain is preferred, and older memories over newer ones.
* NONE — everything else: the ranking is relevance-first, exactly as without this module.

PAST and FIRST win over CURRENT when both occur ("what did I use before the one I have now?"). A cue that
names a time or an order of events rather than a state ("before the concert", "the first time she went",
"first of all") is not an intent: "before"/"after" followed by a noun phrase that is not a pronoun, and
"first" followed by "time", are read as the temporal expressions ``server/temporal.py`` handles. A question about
the order of events ("Which did I do first, the pottery class or the cooking course?", "from earliest to latest",
"我是先学的吉他还是钢琴？") asks for both events and has no intent (``ORDER_QUESTIONS``).
Pure functions; no model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from server.domain import TimeIntent
from server.store.columns import UPDATED_BY

__all__ = ["TimeIntent", "detect", "recency_weight", "update_factor"]


_EN_CURRENT = re.compile(
    r"\b(?:now|right now|currently|(?:my|your|his|her|their|our|the) current|these days|nowadays|at the moment|at present|presently|latest|"
    r"most recent|any ?more|still)\b", re.IGNORECASE)
_EN_PAST = re.compile(
    r"\b(?:(?:did\s+\w+|i|we|you|he|she|they)\s+(?:used|use)\s+to\s+(?:do|be|have|live|work|play|go|eat|drive|own|like|"
    r"love|use|study|support|call|date|teach)|previously|previous|formerly|former|earlier|before(?=\s*(?:\?|$|,|\.|that\b|then\b|this\b|"
    r"it\b|the (?:current|new|change|switch|move|one|raise|pay rise|promotion|upgrade|reorg|restructure|divorce|"
    r"breakup|break-up|relocation|transfer)\b|i\b|we\b|you\b|he\b|she\b|they\b))|in the past|"
    r"prior to (?:that|this|the (?:current|new))|(?:my|our|his|her|their) ex|ex-(?:wife|husband|girlfriend|boyfriend|"
    r"partner|boss))\b", re.IGNORECASE)
_EN_FIRST = re.compile(
    r"\b(?:originally|original|initially|initial|at first|at the start|to begin with|in the beginning|"
    r"first(?!\s+(?:time|of all|thing|person|name|aid|class|half|week|day|date|step|place|met)\b))\b",
    re.IGNORECASE)
# A question about the order of events ("Which did I do first, the pottery class or the cooking course?", "Did I go to
# Lisbon or Kyoto first?", "from earliest to latest", "我是先学的吉他还是钢琴？") asks for both, not for a first or a
# current state: no intent, relevance first, so neither event is lifted or lowered for its age.
_EN_ORDER = re.compile(
    r"\b(?:first|earlier|sooner|later)\b[^.?!;]*\bor\b|\bor\b[^.?!;]*\b(?:first|earlier|sooner|later)\b"
    r"|\bin (?:what|which|the) order\b|\bchronological(?:ly)?\b|\b(?:came|happened|occurred) (?:first|earlier|later)\b"
    r"|\b(?:earliest|oldest|first) to (?:the )?(?:latest|newest|last|most recent)\b"
    r"|\b(?:latest|newest|last|most recent) to (?:the )?(?:earliest|oldest|first)\b", re.IGNORECASE)
_ZH_ORDER = re.compile(r"先[^。？！?]*还是|还是[^。？！?]*先|哪个(?:先|在前|更早|早一些)|谁先|先后|顺序")
ORDER_QUESTIONS = True   # False: the cue words alone, as before (benchmarks/quality/order.py compares both)
_ZH_CURRENT = re.compile(r"现在|目前|最近|如今|眼下|当前|这阵子|这些天|目前为止|最新|还在")
_ZH_PAST = re.compile(r"以前|原来|之前|过去|从前|曾经|以往|早先|旧的|原先|前(?:女友|男友|妻|夫|任|东家|公司|老板)|老东家")
_ZH_FIRST = re.compile(r"最初|一开始|起初|最开始|最早|当初|起先|第一个|刚开始")


def detect(text: str) -> TimeIntent:
    """The query's time intent (English and Chinese cue words; NONE when it names none, or asks for the order of
    events)."""
    if ORDER_QUESTIONS and (_EN_ORDER.search(text) or _ZH_ORDER.search(text)):
        return TimeIntent.NONE
    if _EN_FIRST.search(text) or _ZH_FIRST.search(text):
        return TimeIntent.FIRST
    if _EN_PAST.search(text) or _ZH_PAST.search(text):
        return TimeIntent.PAST
    if _EN_CURRENT.search(text) or _ZH_CURRENT.search(text):
        return TimeIntent.CURRENT
    return TimeIntent.NONE


# How the ranking reads an intent (server/engine/ranking.py; chosen on the dev halves of the knowledge-update and
# recency sets, docs/concepts/updates.md):
UPDATED_FACTOR = 0.35          # a memory a newer one updates, when the query does not ask about the past
CURRENT_RECENCY_WEIGHT = 0.6   # the recency weight a CURRENT query gets (the default's a = 0.3 otherwise)
FIRST_AGE_BOOST = 0.3          # FIRST: × (1 + boost × (1 − decay)), so among unlinked memories the older wins


def recency_weight(intent: TimeIntent, default: float) -> float:
    """The recency weight a query with ``intent`` ranks with: raised for CURRENT, none for PAST and FIRST
    (FIRST prefers older memories through :func:`update_factor`), the default otherwise."""
    if intent == TimeIntent.CURRENT:
        return max(default, CURRENT_RECENCY_WEIGHT)
    if intent in (TimeIntent.PAST, TimeIntent.FIRST):
        return 0.0
    return default


_WANTS = {TimeIntent.NONE: "current", TimeIntent.CURRENT: "current", TimeIntent.PAST: "previous",
          TimeIntent.FIRST: "first"}


def update_factor(intent: TimeIntent, links: np.ndarray, decay: np.ndarray, relevance: np.ndarray, *,
                  chains: Mapping[str, Sequence[int]], target_of: Callable[[str, str], int | None]) -> np.ndarray:
    """Each candidate's update factor. A chain of linked memories (server/engine/updates.py) answers as one: the
    member the intent asks for — the newest (NONE, CURRENT), the one before it (PAST), the oldest (FIRST) — ranks
    with the best relevance among the chain's candidates (its factor lifts its own to that), the other members ×
    UPDATED_FACTOR. When that member is not among the candidates, NONE and CURRENT still demote every member a
    newer one updates. FIRST also lifts older memories (× 1 + FIRST_AGE_BOOST × (1 − decay)), so among unlinked
    memories the older wins. With no links among the candidates (SciFact, most tenants) and no FIRST intent: all
    ones, the ranking exactly as without this module.

    ``links``: each candidate's link bits (server/store/columns.py); ``decay`` its recency decay in [0, 1];
    ``chains``: the linked candidates' positions by chain; ``target_of(tip_id, want)``: the position of the chain
    member wanted, None when it is not a candidate."""
    out = np.ones(len(links))
    if intent == TimeIntent.FIRST:
        out *= 1.0 + FIRST_AGE_BOOST * (1.0 - np.clip(decay, 0.0, 1.0))
    want = _WANTS[intent]
    for tip_id, members in chains.items():
        target = target_of(tip_id, want)
        if target is None:
            if intent in (TimeIntent.NONE, TimeIntent.CURRENT):
                stale = [j for j in members if links[j] & UPDATED_BY]
                out[stale] *= UPDATED_FACTOR
            continue
        best = max(float(relevance[j]) for j in members)
        for j in members:
            if j != target:
                out[j] *= UPDATED_FACTOR
        out[target] *= max(1.0, best / max(float(relevance[target]), 1e-9))
    return out
