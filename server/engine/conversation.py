"""Conversation threading on write: an EPISODIC memory written without a ``context`` is indexed with its
conversation's previous turn as one, so that a user writing a chat turn by turn (``"<speaker>: <text>"``)
gets what the SDK's ``write_conversation`` sends without crafting it.

The previous turn is the EPISODIC memory of the same scope created last at or before this one (ties: the
one written later), no more than ``memory.thread_window_s`` earlier: first the inputs before it in the same
Write, then the tenant's store (read from its columns: one vectorised pass per Write, no lock; a Write
racing another may thread to the turn before the other's, which only changes what is indexed). Only the
content of that turn is taken, never its own context, so a context is one turn long. The context is stored
with the memory (``Memory.context``), so a restart or a re-index builds the same text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from server.domain import MemoryInput, MemoryStatus, MemoryType
from server.store.memory_store import TenantStore

_LOOKBACK = 64   # stored candidates (newest first) checked for the scope before giving up
# A turn folded into a semantic memory (consolidated) is still the turn before the next one.
_TURNS = (int(MemoryStatus.ACTIVE), int(MemoryStatus.PENDING), int(MemoryStatus.CONSOLIDATED))


def _threads(inp: MemoryInput) -> bool:
    return inp.type == MemoryType.EPISODIC and not inp.context.strip() and not inp.key


def thread_contexts(store: TenantStore, inputs: Sequence[MemoryInput], *, window_ms: int,
                    now_ms: int) -> list[MemoryInput]:
    """``inputs`` with each threadable one's ``context`` set to its previous turn's content (when one
    lies inside the window); the others unchanged. ``window_ms`` 0: threading is off."""
    out = list(inputs)
    if window_ms <= 0 or not any(_threads(m) for m in inputs):
        return out
    for i, inp in enumerate(inputs):
        if not _threads(inp):
            continue
        created = inp.created_at_ms or now_ms
        previous = _previous_in_request(inputs[:i], inp, created, now_ms)
        if previous is None:
            previous = _previous_in_store(store, inp.scope, created)
        if previous is not None and created - previous[0] <= window_ms:
            out[i] = dataclasses.replace(inp, context=previous[1])
    return out


def _previous_in_request(before: Sequence[MemoryInput], inp: MemoryInput, created: int,
                         now_ms: int) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for other in before:
        t = other.created_at_ms or now_ms
        if other.type == MemoryType.EPISODIC and other.scope == inp.scope and t <= created and (best is None or t >= best[0]):
            best = (t, other.content)
    return best


def _previous_in_store(store: TenantStore, scope: str, created: int) -> tuple[int, str] | None:
    """The newest live keyless EPISODIC memory of ``scope`` created at or before ``created`` (ties: the later
    write), among the newest few: one pass over the store's columns."""
    cols = store.columns()
    n = len(cols)
    mask = ((cols.type[:n] == int(MemoryType.EPISODIC)) & (cols.created_ms[:n] <= created)
            & np.isin(cols.status[:n], _TURNS))
    docs = np.flatnonzero(mask)            # ascending doc ids: a later write has a larger one
    times = cols.created_ms[docs]
    checked = 0
    while len(docs) and checked < _LOOKBACK:
        newest = times.max()
        same = times == newest
        for doc in docs[same][::-1][:_LOOKBACK - checked].tolist():
            checked += 1
            memory = store.by_doc(int(doc))
            if memory is not None and memory.scope == scope and not memory.key:
                return int(newest), memory.content
        docs, times = docs[~same], times[~same]
    return None
