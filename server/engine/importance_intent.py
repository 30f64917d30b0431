"""Importance intent: a query that asks what the user must know or remember about something ("anything I should
know about nuts?", "what should I remember about the car?", "关于花生有什么要注意的？") ranks with a raised
importance weight, so a warning the writer marked important (a nut allergy, 0.95) rises above a chat about the same
thing (a cookie recipe, 0.2) that the relevance model scores higher. Every other query keeps the default weight
(``ranking.IMPORTANCE_WEIGHT``). Cue words only, English and Chinese; no model.

"Important" as a topic ("why are flowers important to Melanie?") and "remember" as a verb of the story ("what does
Joanna do to remember happy memories?") are not cues: only a question about what to keep in mind is.
"""

from __future__ import annotations

import re

# The importance weight b of a query with this intent: importance = (1 − b) + b × stored importance. Chosen on the
# dev recency set's importance questions (docs/concepts/updates.md); the held-out recency set reports it.
INTENT_IMPORTANCE_WEIGHT = 1.0

_EN = re.compile(
    r"\b(?:(?:should|need to|must|have to|ought to|got to)\s+(?:i\s+|we\s+|you\s+)?(?:know|remember|keep in mind|bear in mind|"
    r"note|watch out|be careful|be aware)|keep in mind|bear in mind|anything important|what(?:'s| is) important to "
    r"(?:know|remember)|remember about|watch out for|be careful (?:about|with))\b", re.IGNORECASE)
_ZH = re.compile(r"注意|记住|记得|留意|当心|小心|要紧|重要的事")


def asks_what_matters(text: str) -> bool:
    """Whether the query asks what to know, remember or watch out for (English and Chinese cue words)."""
    return bool(_EN.search(text) or _ZH.search(text))


def importance_weight(text: str, default: float) -> float:
    """The importance weight a query ranks with: :data:`INTENT_IMPORTANCE_WEIGHT` when it asks what matters."""
    return max(default, INTENT_IMPORTANCE_WEIGHT) if asks_what_matters(text) else default
