"""The agent's read-write loop in one place: recall before answering → answer → remember after → touch
what was used.

``turn`` runs the whole loop in one call, given the user message and a function that answers it from the
recalled memories; ``end_turn`` is its second half on its own, for callers (MCP tools, framework memory
classes) whose answer arrives in a later call than the recall. Both clients run the same steps:
``EngramClient`` blocks, ``AsyncEngramClient`` awaits (``aturn``, ``aend_turn``).

>>> with EngramClient(address, key=KEY) as engram:
...     done = turn(engram, "acme/alice", "Any snack ideas for my flight?",
...                 lambda recalled: llm(f"{recalled.context}\\n\\nUser: Any snack ideas for my flight?"),
...                 source_ref="chat-13#1")
...     done.answer, done.written[0].memory_id, done.used
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram_proto.v1 import service_pb2 as spb
from engram_client._core import MemoryLike, Recall, conversation_inputs

if TYPE_CHECKING:
    from engram_client.aio import AsyncEngramClient
    from engram_client.client import EngramClient

Answer = Callable[[Recall], str]
AsyncAnswer = Callable[[Recall], str | Awaitable[str]]


@dataclass(frozen=True)
class Remembered:
    """What the second half of a turn did: the write results (one per memory, in order) and the ids it
    marked as used (``touch``), with those the server no longer had."""

    written: list[spb.WriteResult] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Turn:
    """One whole turn: what was recalled, the answer, what was written and what was marked as used."""

    recall: Recall
    answer: str
    written: list[spb.WriteResult]
    used: list[str]
    missing: list[str]


def _turn_memories(user_message: str, answer: str, remember: MemoryLike | Sequence[MemoryLike] | None
                   ) -> list[MemoryLike]:
    """By default the exchange, as ``write_conversation`` writes a conversation: two episodic memories,
    ``User: …`` and ``Assistant: …``, the second indexed with the first as its context."""
    if remember is None:
        return list(conversation_inputs([("User", user_message), ("Assistant", answer)]))
    if isinstance(remember, (str, dict)) or not isinstance(remember, Sequence):
        return [remember]  # type: ignore[list-item]
    return list(remember)


def _used_ids(recall: Recall, used: Sequence[str] | None) -> list[str]:
    """By default every recalled memory counts as used (the recall went into the prompt); ``used`` names fewer."""
    return [h.memory.memory_id for h in recall.hits] if used is None else list(used)


def _common(source_ref: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in {"source_ref": source_ref, **fields}.items() if v is not None}


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(i for i in ids if i))


# -- blocking ---------------------------------------------------------------------------------------------
def end_turn(client: EngramClient, tenant_id: str, *, memories: Sequence[MemoryLike] = (),
             used_ids: Sequence[str] = (), source_ref: str = "", **common: Any) -> Remembered:
    """After answering: writes ``memories`` (each gets ``source_ref`` and the ``common`` MemoryInput fields
    it does not set itself), then marks ``used_ids`` as used. Either may be empty."""
    written: list[spb.WriteResult] = []
    if memories:
        written = list(client.write(tenant_id, memories, **_common(source_ref, common)).results)
    ids = _unique(used_ids)
    missing: list[str] = []
    if ids:
        missing = list(client.touch(tenant_id, ids).missing)
    return Remembered(written=written, used=[i for i in ids if i not in missing], missing=missing)


def turn(client: EngramClient, tenant_id: str, user_message: str, answer: Answer | str, *,
         remember: MemoryLike | Sequence[MemoryLike] | None = None, used: Sequence[str] | None = None,
         source_ref: str = "", top_k: int = 5, **recall_options: Any) -> Turn:
    """The whole loop in one call. ``answer`` is the reply text, or a function that makes it from the
    recall (its ``context`` goes into the prompt). ``remember``: what to write after answering (default:
    the exchange, a ``User:`` and an ``Assistant:`` turn; ``[]``: nothing). ``used``: the recalled ids the
    answer used (default: all of them)."""
    recalled = client.recall(tenant_id, user_message, top_k=top_k, **recall_options)
    text = answer if isinstance(answer, str) else answer(recalled)
    done = end_turn(client, tenant_id, memories=_turn_memories(user_message, text, remember),
                    used_ids=_used_ids(recalled, used), source_ref=source_ref)
    return Turn(recall=recalled, answer=text, written=done.written, used=done.used, missing=done.missing)


# -- asyncio ----------------------------------------------------------------------------------------------
async def aend_turn(client: AsyncEngramClient, tenant_id: str, *, memories: Sequence[MemoryLike] = (),
                    used_ids: Sequence[str] = (), source_ref: str = "", **common: Any) -> Remembered:
    """``end_turn`` on the asyncio client."""
    written: list[spb.WriteResult] = []
    if memories:
        written = list((await client.write(tenant_id, memories, **_common(source_ref, common))).results)
    ids = _unique(used_ids)
    missing: list[str] = []
    if ids:
        missing = list((await client.touch(tenant_id, ids)).missing)
    return Remembered(written=written, used=[i for i in ids if i not in missing], missing=missing)


async def aturn(client: AsyncEngramClient, tenant_id: str, user_message: str, answer: AsyncAnswer | str, *,
                remember: MemoryLike | Sequence[MemoryLike] | None = None, used: Sequence[str] | None = None,
                source_ref: str = "", top_k: int = 5, **recall_options: Any) -> Turn:
    """``turn`` on the asyncio client; ``answer`` may be a coroutine function."""
    recalled = await client.recall(tenant_id, user_message, top_k=top_k, **recall_options)
    if isinstance(answer, str):
        text = answer
    else:
        made = answer(recalled)
        text = await made if inspect.isawaitable(made) else made
    done = await aend_turn(client, tenant_id, memories=_turn_memories(user_message, text, remember),
                           used_ids=_used_ids(recalled, used), source_ref=source_ref)
    return Turn(recall=recalled, answer=text, written=done.written, used=done.used, missing=done.missing)
