"""``EngramRetriever``: engram's ranked search as a LangChain retriever (sync and async)."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr

from engram_integrations._clients import Clients
from engram_integrations._records import hit_view, now_ms
from engram_proto.v1 import messages_pb2 as pb
from engram_client import AsyncEngramClient, EngramClient
from engram_client.loop import aend_turn, end_turn


def hit_document(hit: pb.Hit, *, at_ms: int) -> Document:
    """The memory's content as page_content; id, type, age, score and its breakdown in metadata."""
    metadata = hit_view(hit, at_ms=at_ms)
    content = metadata.pop("content")
    return Document(id=hit.memory.memory_id, page_content=content, metadata=metadata)


class EngramRetriever(BaseRetriever):
    """Retrieves a tenant's memories from engram: hybrid dense + BM25, reranked, weighed by recency and
    importance, exactly as engram's Search ranks them.

    Setup: ``pip install 'engram-grpc[langchain]'`` and a running engram server.

    >>> retriever = EngramRetriever(address="127.0.0.1:50051", api_key=KEY, tenant_id="acme/alice", k=3)
    >>> docs = retriever.invoke("does alice have any food allergy?")
    >>> docs[0].metadata["score"], docs[0].metadata["breakdown"]["bm25_rank"]

    ``k`` can also be given per call: ``retriever.invoke(query, k=1)``. With ``mark_used`` the returned
    memories are marked as used (engram's Touch), since they go into the prompt.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tenant_id: str
    k: int = Field(default=5, ge=1)
    filter: dict[str, Any] | None = None
    """engram Filter fields, e.g. ``{"types": ["semantic"], "entities_any": ["alice"]}``."""
    include_pending: bool = False
    search_options: dict[str, Any] = Field(default_factory=dict)
    """Other SearchQuery fields, e.g. ``{"rerank_depth": 20}``."""
    mark_used: bool = False
    client: EngramClient | None = None
    async_client: AsyncEngramClient | None = None
    address: str = ""
    api_key: SecretStr | None = None
    timeout_s: float = 30.0
    _clients: Clients = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._clients = Clients(client=self.client, async_client=self.async_client, address=self.address,
                                key=self.api_key.get_secret_value() if self.api_key else "", timeout_s=self.timeout_s)

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"top_k": int(kwargs.pop("k", self.k)), "filter": kwargs.pop("filter", self.filter),
                "include_pending": self.include_pending, **self.search_options, **kwargs}

    def _search(self, client: EngramClient, query: str, options: dict[str, Any]) -> pb.QueryResult:
        result = client.search(self.tenant_id, query, **options)
        if self.mark_used and result.hits:
            end_turn(client, self.tenant_id, used_ids=[h.memory.memory_id for h in result.hits])
        return result

    async def _asearch(self, client: AsyncEngramClient, query: str, options: dict[str, Any]) -> pb.QueryResult:
        result = await client.search(self.tenant_id, query, **options)
        if self.mark_used and result.hits:
            await aend_turn(client, self.tenant_id, used_ids=[h.memory.memory_id for h in result.hits])
        return result

    @staticmethod
    def _documents(result: pb.QueryResult) -> list[Document]:
        at = now_ms()
        return [hit_document(h, at_ms=at) for h in result.hits]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return self._documents(self._search(self._clients.sync(), query, self._options(kwargs)))

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        options = self._options(kwargs)
        result = await self._clients.run(lambda c: self._search(c, query, options),
                                         lambda c: self._asearch(c, query, options))
        return self._documents(result)
