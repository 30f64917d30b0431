"""``EngramMemoryBlock``: engram as a long-term block of LlamaIndex's ``Memory``.

On ``aget`` the block recalls what matters for the latest messages and returns engram's prompt-ready
context block; on ``aput`` (messages flushed out of the short-term memory) it writes them as a
conversation (``User: …`` / ``Assistant: …`` turns, each indexed with the one before) through the SDK's
``end_turn``, which also marks the memories it last recalled as used.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import BaseMemoryBlock
from pydantic import ConfigDict, Field, PrivateAttr

from engram_integrations._clients import Clients
from engram_client import AsyncEngramClient, EngramClient
from engram_client import aend_turn, conversation_inputs, end_turn

_SPEAKER = {MessageRole.USER: "User", MessageRole.ASSISTANT: "Assistant", MessageRole.SYSTEM: "System"}


class EngramMemoryBlock(BaseMemoryBlock[str]):
    """>>> memory = Memory.from_defaults(session_id="chat-13", memory_blocks=[
    ...     EngramMemoryBlock(tenant_id="acme/alice", address="127.0.0.1:50051", api_key=KEY)])"""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="engram", description="The name of the memory block.")
    tenant_id: str = Field(description="The engram tenant whose memories this block reads and writes.")
    top_k: int = Field(default=5, ge=1, description="Memories recalled per get.")
    query_messages: int = Field(default=1, ge=1, description="How many of the latest messages make the query.")
    client: EngramClient | None = None
    async_client: AsyncEngramClient | None = None
    address: str = ""
    api_key: str = ""
    timeout_s: float = 30.0
    _clients: Clients = PrivateAttr()
    _recalled: list[str] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        self._clients = Clients(client=self.client, async_client=self.async_client, address=self.address,
                                key=self.api_key, timeout_s=self.timeout_s)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = " ".join((m.content or "").strip() for m in (messages or [])[-self.query_messages:]).strip()
        if not query:
            return ""

        def recall(c: Any) -> Any:  # the same call on either client; the asyncio one returns its awaitable
            return c.recall(self.tenant_id, query, top_k=self.top_k)

        recalled = await self._clients.run(recall, recall)
        self._recalled = [h.memory.memory_id for h in recalled.hits]
        return str(recalled.context)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        turns = [{"speaker": _SPEAKER.get(m.role, str(m.role.value).capitalize()), "text": m.content,
                  "source_ref": str(m.additional_kwargs.get("session_id", ""))}
                 for m in messages if (m.content or "").strip()]
        memories = conversation_inputs(turns)
        used, self._recalled = self._recalled, []

        async def on_aio(c: AsyncEngramClient) -> None:
            await aend_turn(c, self.tenant_id, memories=memories, used_ids=used)

        await self._clients.run(lambda c: end_turn(c, self.tenant_id, memories=memories, used_ids=used), on_aio)
