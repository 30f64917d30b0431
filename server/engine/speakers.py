"""The speaker a question is about. A conversation written turn by turn as ``"<speaker>: <text>"`` memories holds both
speakers' turns, and a question that names one of them ("What did Caroline research?") asks what that speaker said or
did. The other speaker's reply shares the question's words and often outranks the answer ("Melanie: Thanks for the tip,
Caroline. Doing research and readying myself emotionally makes sense." above "Caroline: Researching adoption agencies
…").

After the rerank and the second hop, :func:`speaker_relevance` multiplies by ``SPEAKER_FACTOR`` the relevance of each
EPISODIC candidate whose speaker (``updates.split_speaker``: a leading ``"Name:"``) is the one speaker among the
candidates' speakers that the question names as a word; a question that names none of them, or two ("What do Jon and
Gina both have in common?"), is left alone. The factor is a prior on the calibrated probability that the turn answers
(capped below 1), so the block's floors read it as any relevance. Memories without a speaker (facts, documents,
SciFact's abstracts, the written sets' statements) are never touched. Chosen on the LoCoMo dev conversations
(docs/benchmarks/quality.md, the speaker rule's variants; docs/concepts/ranking.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from server.domain import Memory, MemoryType
from server.engine.updates import split_speaker
from server.text import has_cjk

SPEAKER_FACTOR = 1.5     # × on the relevance of the named speaker's turns (1: off)
MAX_RELEVANCE = 0.999    # a relevance is a probability: the factor never lifts one to 1


def _named_in(name: str, query: str) -> bool:
    """``name`` occurs in ``query`` as a word (a CJK name: as a substring, CJK text has no word boundaries)."""
    if has_cjk(name):
        return name in query
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query) is not None


def speakers_of(memories: Sequence[Memory | None]) -> list[str]:
    """The speaker of each memory: its leading ``"Name:"`` for an EPISODIC memory, else ""."""
    return [split_speaker(m.content)[0] if m is not None and m.type == MemoryType.EPISODIC else "" for m in memories]


def named_speaker(query: str, speakers: Sequence[str]) -> str:
    """The one speaker of ``speakers`` that ``query`` names, else "" (none, or more than one)."""
    named = {s for s in speakers if s and _named_in(s, query)}
    return named.pop() if len(named) == 1 else ""


def speaker_relevance(query: str, memories: Sequence[Memory | None], relevance: np.ndarray, *,
                      factor: float = SPEAKER_FACTOR) -> np.ndarray:
    """``relevance`` with the named speaker's turns × ``factor`` (at most ``MAX_RELEVANCE``); the same array when the
    question names no single speaker of ``memories`` or ``factor`` is 1."""
    if factor == 1.0 or len(relevance) == 0:
        return relevance
    speakers = speakers_of(memories)
    name = named_speaker(query, speakers)
    if not name:
        return relevance
    own = np.asarray([s == name for s in speakers], dtype=np.bool_)
    out = np.asarray(relevance, dtype=np.float64).copy()
    out[own] = np.maximum(out[own], np.minimum(out[own] * factor, MAX_RELEVANCE))
    return out
