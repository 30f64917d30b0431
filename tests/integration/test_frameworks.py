"""The LangChain and LlamaIndex integrations against the real in-process server: their retrievers return
what a direct Search returns, and their memory classes keep the conversation in engram."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from llama_index.core.schema import MetadataMode, QueryBundle
from support import ADMIN_KEY, start_server

from engram_integrations.langchain import EngramChatMessageHistory
from engram_integrations.langchain import EngramRetriever as LangChainRetriever
from engram_integrations.llamaindex import EngramMemoryBlock
from engram_integrations.llamaindex import EngramRetriever as LlamaIndexRetriever
from engram_client import AsyncEngramClient, EngramClient

FACTS = [{"content": "Alice is allergic to peanuts", "type": "semantic", "importance": 0.9, "entities": ["alice"]},
         {"content": "Alice moved to Lisbon in March", "type": "episodic", "source_ref": "chat-12#4"},
         {"content": "Alice prefers short answers with bullet points", "type": "semantic"},
         {"content": "Alice's cat is called Miso", "type": "semantic", "entities": ["miso"]},
         {"content": "Alice booked flights to Porto for 12 May", "type": "episodic"},
         {"content": "To file expenses, Alice uses the Concur app", "type": "procedural"}]
QUERIES = ["does alice have any food allergy?", "where does Alice live now?", "travel plans"]


@pytest.fixture(scope="module")
def engram(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder: Any) -> Iterator[dict[str, Any]]:
    # Searches here do not count as uses: a periodic flush between a direct Search and the same search through
    # the integration would otherwise move the access boost between the two (their scores are compared).
    running = start_server(tmp_path_factory.mktemp("frameworks") / "data", embedder=embedder,
                           access_top_hits=0)
    with EngramClient(running.address, key=ADMIN_KEY) as admin:
        for tenant in ("fw/lc", "fw/li", "fw/chat"):
            admin.create_tenant(tenant, initial=FACTS)
        key = admin.create_key("fw", prefixes=["fw/"]).secret
        with EngramClient(running.address, key=key) as client:
            yield {"address": running.address, "key": key, "admin": admin, "client": client}
    running.stop()


def search_ids(admin: EngramClient, tenant: str, query: str, k: int, **options: Any) -> list[str]:
    return [h.memory.memory_id for h in admin.search(tenant, query, top_k=k, **options).hits]


# -- LangChain ------------------------------------------------------------------------------------------------
def test_langchain_retriever_returns_what_search_returns(engram: dict[str, Any]) -> None:
    retriever = LangChainRetriever(client=engram["client"], tenant_id="fw/lc", k=3)
    by_address = LangChainRetriever(address=engram["address"], api_key=engram["key"], tenant_id="fw/lc", k=3)
    for query in QUERIES:
        direct = engram["admin"].search("fw/lc", query, top_k=3)
        docs = retriever.invoke(query)
        assert [d.id for d in docs] == [h.memory.memory_id for h in direct.hits]
        assert [d.page_content for d in docs] == [h.memory.content for h in direct.hits]
        assert [d.metadata["score"] for d in docs] == [pytest.approx(h.breakdown.final, abs=1e-5) for h in direct.hits]
        assert [d.id for d in asyncio.run(retriever.ainvoke(query))] == [d.id for d in docs]  # thread path
        assert [d.id for d in asyncio.run(by_address.ainvoke(query))] == [d.id for d in docs]  # grpc.aio path
    top = retriever.invoke(QUERIES[0])[0]
    assert top.page_content == "Alice is allergic to peanuts"
    assert {"dense_rank", "bm25_rank", "rrf", "relevance", "decay", "importance_weight", "final"} <= set(
        top.metadata["breakdown"])
    assert top.metadata["type"] == "semantic" and top.metadata["entities"] == ["alice"]
    episodic = LangChainRetriever(client=engram["client"], tenant_id="fw/lc", filter={"types": ["episodic"]})
    assert {d.metadata["type"] for d in episodic.invoke("Alice")} == {"episodic"}
    assert [d.id for d in episodic.invoke("Alice")] == search_ids(engram["admin"], "fw/lc", "Alice", 5,
                                                                   filter={"types": ["episodic"]})


def test_langchain_retriever_meets_the_standard_retriever_contract(engram: dict[str, Any]) -> None:
    """What langchain-tests' RetrieversIntegrationTests checks (k in the constructor and per call, sync and
    async return Documents); the package itself runs in the slow fresh-venv test."""
    params = {"address": engram["address"], "api_key": engram["key"], "tenant_id": "fw/lc"}
    query = QUERIES[0]
    for k in (1, 3):
        docs = LangChainRetriever(**params, k=k).invoke(query)
        assert len(docs) == k and all(isinstance(d, Document) for d in docs)
    retriever = LangChainRetriever(**params)
    assert [len(retriever.invoke(query, None, k=k)) for k in (1, 3)] == [1, 3]
    docs = asyncio.run(retriever.ainvoke(query))
    assert isinstance(docs, list) and docs and all(isinstance(d, Document) for d in docs)


def test_langchain_retriever_marks_what_it_returned_as_used(engram: dict[str, Any]) -> None:
    admin = engram["admin"]
    uses = len(list(admin.iter_audit("fw/lc", ops=["use"])))
    docs = LangChainRetriever(client=engram["client"], tenant_id="fw/lc", k=2, mark_used=True).invoke(QUERIES[1])
    entries = list(admin.iter_audit("fw/lc", ops=["use"]))
    assert len(entries) == uses + 1 and sorted(r.memory_id for r in entries[-1].refs) == sorted(d.id for d in docs)


def test_langchain_chat_history_keeps_the_session_in_engram(engram: dict[str, Any]) -> None:
    history = EngramChatMessageHistory(tenant_id="fw/chat", session_id="s1", client=engram["client"])
    said = [SystemMessage("You are Alice's assistant"), HumanMessage("ok"), AIMessage("ok"), HumanMessage("ok"),
            HumanMessage("I switched teams to the Berlin office last week")]
    history.add_messages(said[:3])
    history.add_messages(said[3:])
    again = EngramChatMessageHistory(tenant_id="fw/chat", session_id="s1", address=engram["address"],
                                     api_key=engram["key"])
    assert [(m.type, m.content) for m in again.messages] == [(m.type, m.content) for m in said]  # "ok" x3 kept
    assert asyncio.run(again.aget_messages()) == again.messages
    stored = sorted(engram["admin"].iter_memories("fw/chat", filter={"scope": "chat:s1"}), key=lambda m: m.key)
    assert [m.source_ref for m in stored] == [f"s1#{n}" for n in range(1, 6)]
    assert [m.context for m in stored] == ["", "system: You are Alice's assistant", "human: ok", "ai: ok", "human: ok"]

    # the messages are memories: a retriever of the tenant finds them, from any session
    docs = LangChainRetriever(client=engram["client"], tenant_id="fw/chat", k=3).invoke(
        "who switched teams to the Berlin office?")
    assert "I switched teams to the Berlin office last week" in [d.page_content for d in docs]

    other = EngramChatMessageHistory(tenant_id="fw/chat", session_id="s2", client=engram["client"])
    other.used_ids = [docs[0].id]  # what this turn's prompt used
    asyncio.run(other.aadd_messages([HumanMessage("which office?"), AIMessage("Berlin")]))
    assert [m.content for m in other.messages] == ["which office?", "Berlin"] and other.used_ids == []
    last_use = list(engram["admin"].iter_audit("fw/chat", ops=["use"]))[-1]
    assert [r.memory_id for r in last_use.refs] == [docs[0].id]

    history.clear()
    assert history.messages == [] and [m.content for m in other.messages] == ["which office?", "Berlin"]
    asyncio.run(other.aclear())
    assert other.messages == []


# -- LlamaIndex -----------------------------------------------------------------------------------------------
def test_llamaindex_retriever_returns_what_search_returns(engram: dict[str, Any]) -> None:
    retriever = LlamaIndexRetriever(tenant_id="fw/li", client=engram["client"], similarity_top_k=3)
    by_address = LlamaIndexRetriever(tenant_id="fw/li", address=engram["address"], api_key=engram["key"],
                                     similarity_top_k=3)
    for query in QUERIES:
        direct = engram["admin"].search("fw/li", query, top_k=3)
        nodes = retriever.retrieve(query)
        assert [n.node.node_id for n in nodes] == [h.memory.memory_id for h in direct.hits]
        assert [n.score for n in nodes] == [pytest.approx(h.breakdown.final, abs=1e-5) for h in direct.hits]
        assert [n.node.node_id for n in asyncio.run(by_address.aretrieve(QueryBundle(query)))] == [
            n.node.node_id for n in nodes]
        assert [n.node.node_id for n in asyncio.run(retriever.aretrieve(query))] == [n.node.node_id for n in nodes]
    top = retriever.retrieve(QUERIES[0])[0].node
    assert top.get_content() == "Alice is allergic to peanuts" and top.metadata["breakdown"]["final"] > 0
    seen_by_llm = top.get_content(metadata_mode=MetadataMode.LLM)
    assert "type: semantic" in seen_by_llm and "breakdown" not in seen_by_llm and top.node_id not in seen_by_llm


def test_llamaindex_memory_block_recalls_and_remembers(engram: dict[str, Any]) -> None:
    admin = engram["admin"]
    block = EngramMemoryBlock(tenant_id="fw/li", client=engram["client"], top_k=2)
    asked = [ChatMessage(role="user", content="Can you suggest a snack for Alice's flight?")]
    context = asyncio.run(block.aget(asked))
    assert context and context == admin.recall("fw/li", asked[0].content, top_k=2).context
    recalled = [h.memory.memory_id for h in admin.search("fw/li", asked[0].content, top_k=2).hits]

    # LlamaIndex's Memory flushes older messages out of its short-term queue into the block: engram keeps them
    memory = Memory.from_defaults(session_id="chat-21", token_limit=40, chat_history_token_ratio=0.5,
                                  token_flush_size=10, tokenizer_fn=str.split, memory_blocks=[block])
    turns = [("user", "Can you suggest a snack for Alice's flight?"), ("assistant", "Rice crackers, no peanuts."),
             ("user", "And a book for the trip?"), ("assistant", "A short story collection by Alice Munro."),
             ("user", "Thanks, that is all for today")]
    for role, text in turns:
        memory.put(ChatMessage(role=role, content=text))
    prompt = str(memory.get()[0].content)  # Memory inserts the block's context as a system message
    held = {m.content for m in admin.iter_memories("fw/li")}
    assert "<engram>" in prompt and [c for c in held if c in prompt]
    written = [m for m in admin.iter_memories("fw/li") if m.source_ref == "chat-21"]
    assert [m.content for m in written][:2] == ["User: Can you suggest a snack for Alice's flight?",
                                                "Assistant: Rice crackers, no peanuts."]
    assert written[1].context == written[0].content  # each turn indexed with the one before
    uses = list(admin.iter_audit("fw/li", ops=["use"]))
    assert uses and set(recalled) & {r.memory_id for e in uses for r in e.refs}


def test_llamaindex_retriever_on_the_asyncio_client(engram: dict[str, Any]) -> None:
    async def main() -> list[str]:
        async with AsyncEngramClient(engram["address"], key=engram["key"]) as client:
            nodes = await LlamaIndexRetriever(tenant_id="fw/li", async_client=client).aretrieve(QUERIES[2])
            return [n.node.node_id for n in nodes]

    assert asyncio.run(main()) == search_ids(engram["admin"], "fw/li", QUERIES[2], 5)
