"""An agent's memory loop in LangChain, offline: the model is stubbed, every engram call is real.

    ENGRAM_KEY=egk_... .venv/bin/python examples/langchain_agent.py     # against `make serve`
"""

import os

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from engram_integrations.langchain import EngramChatMessageHistory, EngramRetriever

engram = {"address": os.environ.get("ENGRAM_ADDRESS", "127.0.0.1:50051"), "api_key": os.environ["ENGRAM_KEY"]}
retriever = EngramRetriever(tenant_id="acme/alice", k=3, **engram)
history = EngramChatMessageHistory(tenant_id="acme/alice", session_id="demo-langchain", **engram)
llm = RunnableLambda(lambda prompt: AIMessage(f"(LLM answer given {len(prompt)} prompt characters)"))  # stub

for message in ["I'm allergic to peanuts.", "Can you suggest a snack for my flight?"]:
    docs = retriever.invoke(message)  # before answering
    context = "\n".join(f"- {d.page_content} (score {d.metadata['score']:.3f})" for d in docs)
    answer = llm.invoke(f"Memories:\n{context}\n\nConversation: {history.messages}\n\nUser: {message}")
    print(f"{message}\n{context}\n{answer.content}\n")
    history.used_ids = [d.id for d in docs]  # marked as used when the turn is written
    history.add_messages([HumanMessage(message), answer])  # after answering
