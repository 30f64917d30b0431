"""``EngramRetriever``: engram's ranked search as a LlamaIndex retriever (sync and async)."""

from __future__ import annotations

from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from engram_integrations._clients import Clients
from engram_integrations._records import hit_view, now_ms
from engram_proto.v1 import messages_pb2 as pb
from engram_client import AsyncEngramClient, EngramClient

# What the LLM sees of a node besides its text; the ids, score and breakdown stay in metadata only.
LLM_METADATA = ("type", "created_at", "entities", "source_ref")


def hit_node(hit: pb.Hit, *, at_ms: int) -> NodeWithScore:
    metadata = hit_view(hit, at_ms=at_ms)
    text = metadata.pop("content")
    hidden = [k for k in metadata if k not in LLM_METADATA]
    node = TextNode(id_=hit.memory.memory_id, text=text, metadata=metadata, excluded_llm_metadata_keys=hidden,
                    excluded_embed_metadata_keys=list(metadata))
    return NodeWithScore(node=node, score=float(hit.breakdown.final))


class EngramRetriever(BaseRetriever):
    """Retrieves a tenant's memories from engram, ranked as engram's Search ranks them.

    >>> retriever = EngramRetriever(tenant_id="acme/alice", address="127.0.0.1:50051", api_key=KEY)
    >>> nodes = retriever.retrieve("does alice have any food allergy?")
    >>> nodes[0].node.node_id, nodes[0].score, nodes[0].node.metadata["breakdown"]
    """

    def __init__(self, *, tenant_id: str, client: EngramClient | None = None,
                 async_client: AsyncEngramClient | None = None, address: str = "", api_key: str = "",
                 similarity_top_k: int = 5, filter: dict[str, Any] | None = None,  # noqa: A002
                 include_pending: bool = False, search_options: dict[str, Any] | None = None,
                 timeout_s: float = 30.0, callback_manager: CallbackManager | None = None,
                 verbose: bool = False) -> None:
        self.tenant_id = tenant_id
        self.similarity_top_k = similarity_top_k
        self.filter = filter
        self.include_pending = include_pending
        self.search_options = dict(search_options or {})
        self._clients = Clients(client=client, async_client=async_client, address=address, key=api_key,
                                timeout_s=timeout_s)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _options(self) -> dict[str, Any]:
        return {"top_k": self.similarity_top_k, "filter": self.filter, "include_pending": self.include_pending,
                **self.search_options}

    @staticmethod
    def _nodes(result: pb.QueryResult) -> list[NodeWithScore]:
        at = now_ms()
        return [hit_node(h, at_ms=at) for h in result.hits]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self._clients.sync().search(self.tenant_id, query_bundle.query_str, **self._options()))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        def search(c: Any) -> Any:  # the same call on either client; the asyncio one returns its awaitable
            return c.search(self.tenant_id, query_bundle.query_str, **self._options())

        return self._nodes(await self._clients.run(search, search))
