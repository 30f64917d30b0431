"""``EngramChatMessageHistory``: a LangChain chat history whose messages are engram memories.

Each message is written (through the SDK's ``end_turn``) as an episodic memory of the tenant, scoped to
the session (scope ``chat:<session_id>``), in the slot of its position (key ``m000001``, ...), with
``source_ref`` ``<session_id>#<position>``, its role in metadata and the message before it as its indexed
``context`` (as ``write_conversation`` writes turns). The slot keeps two equal messages
("ok", "ok") as two memories instead of merging them as near-duplicates; the messages stay searchable
by every retriever of the tenant, so an agent recalls what was said in earlier sessions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage

from engram_integrations._clients import Clients
from engram_proto.v1 import messages_pb2 as pb
from engram_client import AsyncEngramClient, EngramClient
from engram_client.loop import aend_turn, end_turn

_BY_ROLE = {"human": HumanMessage, "ai": AIMessage, "system": SystemMessage}


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.text)


def message_of(memory: pb.Memory) -> BaseMessage:
    role = memory.metadata.get("role", "human")
    if role == "tool":
        return ToolMessage(content=memory.content, tool_call_id=memory.metadata.get("tool_call_id", ""))
    cls = _BY_ROLE.get(role)
    return cls(content=memory.content) if cls is not None else ChatMessage(role=role, content=memory.content)


class EngramChatMessageHistory(BaseChatMessageHistory):
    """A session's messages, kept in engram.

    >>> history = EngramChatMessageHistory(tenant_id="acme/alice", session_id="chat-13",
    ...                                    address="127.0.0.1:50051", api_key=KEY)
    >>> history.add_messages([HumanMessage("I moved to Lisbon"), AIMessage("Noted!")])
    >>> history.messages
    [HumanMessage(content='I moved to Lisbon'), AIMessage(content='Noted!')]

    ``used_ids``: memory ids the next ``add_messages`` marks as used (e.g. the ids of the documents a
    retriever put into this turn's prompt); they are cleared once marked.
    """

    def __init__(self, *, tenant_id: str, session_id: str, client: EngramClient | None = None,
                 async_client: AsyncEngramClient | None = None, address: str = "", api_key: str = "",
                 timeout_s: float = 30.0) -> None:
        if not session_id:
            raise ValueError("session_id is empty")
        self.tenant_id = tenant_id
        self.session_id = session_id
        self.used_ids: list[str] = []
        self._clients = Clients(client=client, async_client=async_client, address=address, key=api_key,
                                timeout_s=timeout_s)

    @property
    def scope(self) -> str:
        return f"chat:{self.session_id}"

    def _filter(self) -> dict[str, Any]:
        return {"scope": self.scope, "statuses": ["active"]}

    def _inputs(self, messages: Sequence[BaseMessage], held: Sequence[pb.Memory]) -> list[dict[str, Any]]:
        """Positions go on from the highest the session used, whatever became of that message since; each
        message is indexed with the one before as its context (``role: text``), as conversations are."""
        positions = [(int(m.key[1:]), m) for m in held if m.key[1:].isdigit()]
        start = max((n for n, _ in positions), default=0) + 1
        last = max(positions, key=lambda p: p[0])[1] if positions else None
        previous = f"{last.metadata.get('role', 'human')}: {last.content}" if last is not None else ""
        out = []
        for n, message in enumerate(messages, start=start):
            metadata = {"role": message.type, "session_id": self.session_id}
            if isinstance(message, ToolMessage):
                metadata["tool_call_id"] = message.tool_call_id
            elif isinstance(message, ChatMessage):
                metadata["role"] = message.role
            out.append({"content": _text(message), "type": "episodic", "scope": self.scope, "key": f"m{n:06d}",
                        "source_ref": f"{self.session_id}#{n}", "metadata": metadata, "context": previous})
            previous = f"{metadata['role']}: {_text(message)}"
        return out

    @staticmethod
    def _ordered(memories: Sequence[pb.Memory]) -> list[BaseMessage]:
        return [message_of(m) for m in sorted(memories, key=lambda m: m.key)]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return self._ordered(list(self._clients.sync().iter_memories(self.tenant_id, filter=self._filter())))

    async def aget_messages(self) -> list[BaseMessage]:
        async def on_aio(client: AsyncEngramClient) -> list[pb.Memory]:
            return [m async for m in client.iter_memories(self.tenant_id, filter=self._filter())]

        return self._ordered(await self._clients.run(
            lambda c: list(c.iter_memories(self.tenant_id, filter=self._filter())), on_aio))

    def _add(self, client: EngramClient, messages: Sequence[BaseMessage]) -> None:
        held = list(client.iter_memories(self.tenant_id, filter={"scope": self.scope}))
        end_turn(client, self.tenant_id, memories=self._inputs(messages, held), used_ids=self.used_ids)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._add(self._clients.sync(), messages)
        self.used_ids = []

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        async def on_aio(client: AsyncEngramClient) -> None:
            held = [m async for m in client.iter_memories(self.tenant_id, filter={"scope": self.scope})]
            await aend_turn(client, self.tenant_id, memories=self._inputs(messages, held), used_ids=self.used_ids)

        await self._clients.run(lambda c: self._add(c, messages), on_aio)
        self.used_ids = []

    def clear(self) -> None:
        """Purges the session's messages (Forget, delete mode)."""
        self._clients.sync().forget(self.tenant_id, filter={"scope": self.scope}, delete=True, include_pinned=True)

    async def aclear(self) -> None:
        def forget(c: Any) -> Any:  # the same call on either client; the asyncio one returns its awaitable
            return c.forget(self.tenant_id, filter={"scope": self.scope}, delete=True, include_pinned=True)

        await self._clients.run(forget, forget)
