"""An agent's memory loop in LlamaIndex, offline: the model is stubbed, every engram call is real.

    ENGRAM_KEY=egk_... .venv/bin/python examples/llamaindex_agent.py     # against `make serve`
"""

import os

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from engram_integrations.llamaindex import EngramMemoryBlock, EngramRetriever

engram = {"address": os.environ.get("ENGRAM_ADDRESS", "127.0.0.1:50051"), "api_key": os.environ["ENGRAM_KEY"]}
retriever = EngramRetriever(tenant_id="acme/alice", similarity_top_k=3, **engram)
memory = Memory.from_defaults(session_id="demo-llamaindex", token_limit=12, token_flush_size=8,
                              tokenizer_fn=str.split,  # whitespace tokens: no tokenizer download
                              memory_blocks=[EngramMemoryBlock(tenant_id="acme/alice", **engram)])

for message in ["I'm allergic to peanuts.", "Can you suggest a snack for my flight?"]:
    print(message)
    memory.put(ChatMessage(role="user", content=message))  # older turns flush out of the queue into engram
    for hit in retriever.retrieve(message):
        print(f"  {hit.score:.3f} {hit.node.get_content()}")
    prompt = memory.get()  # engram's context block comes first, as a system message
    answer = f"(LLM answer given {len(prompt)} messages)"  # stub: no LLM needed
    print("  ->", answer)
    memory.put(ChatMessage(role="assistant", content=answer))
