"""Passages of a long memory for BM25: the windows it is also indexed under, and the fold back to memories.

BM25's length normalisation dilutes a long memory: a 2 KB chat turn that holds the answer in one sentence scores
below a short turn that shares the same words, and below it in the fused list the cross-encoder never reads it. So
a memory whose header and content (its context left out: that is the previous turn, a memory of its own) run past
``WINDOW_CHARS`` is indexed as one Lucene *block*: its document as before, plus one document per overlapping window
of that text (``WINDOW_CHARS`` characters every ``WINDOW_STRIDE``, cut at spaces; at most ``MAX_WINDOWS``, the
stride widened so they reach the end). Every document of the block carries the memory's id, so the id term that
replaces or deletes the memory replaces or deletes its windows with it, and a hit on a window is a hit on its
memory. A search keeps each memory once, at its best document (max pooling: :func:`fold`), as the dense side does
with passage vectors. Pure functions; no JVM here.
"""

from __future__ import annotations

import numpy as np

from server.text import without_context

WINDOW_CHARS = 800      # a window's length: what the cross-encoder reads of a long memory (server/engine/passages.py)
WINDOW_STRIDE = 400     # windows overlap by half, so a sentence cut by one lies whole in the next
MAX_WINDOWS = 16        # past 16 half-overlapping windows (~7 KB) the stride widens to reach the end


def passages(text: str, *, size: int = WINDOW_CHARS, stride: int = WINDOW_STRIDE) -> list[str]:
    """``text`` in windows of at most ``size`` characters starting every ``stride``, each cut back to a whitespace
    boundary where there is one (CJK text without spaces is cut at the character); ``[text]`` when it fits."""
    if len(text) <= size:
        return [text]
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + size // 2, end)
            end = space if space > 0 else end
        out.append(text[start:end].strip())
        if end >= len(text):
            break
        nxt = start + stride
        space = text.find(" ", nxt, nxt + 40)
        start = space + 1 if space > 0 else nxt
    return [p for p in out if p]


def windows(text: str, *, size: int = WINDOW_CHARS, limit: int = MAX_WINDOWS) -> list[str]:
    """The windows a memory indexed as ``text`` (an :func:`~server.text.indexed_text`) is also indexed under:
    ``[]`` when its header and content fit ``size``, else at most ``limit`` overlapping windows over them."""
    body = without_context(text)
    if len(body) <= size or limit <= 0:
        return []
    stride = max(size // 2, -(-(len(body) - size) // max(1, limit - 1)))
    return passages(body, size=size, stride=stride)[:limit]


def fold(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Hits best first, several of them per memory (a memory's document and its windows share its id), as each
    memory once at its first (best) hit, cut to ``k``: (scores, ids)."""
    if len(ids) < 2:
        return scores[:k], ids[:k]
    _, first = np.unique(ids, return_index=True)
    if len(first) == len(ids):
        return scores[:k], ids[:k]
    first = np.sort(first)[:k]
    return scores[first], ids[first]
