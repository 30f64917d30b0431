"""An agent's memory loop over MCP, offline: the answer is stubbed, every engram call is real.

    ENGRAM_KEY=egk_... .venv/bin/python examples/mcp_agent.py     # against `make serve`
"""

import asyncio
import os

from mcp import Client, StdioServerParameters

ENGRAM = StdioServerParameters(command=".venv/bin/engram", args=["mcp", "--tenant", "acme/alice"],
                               env={"ENGRAM_KEY": os.environ["ENGRAM_KEY"],
                                    "ENGRAM_ADDRESS": os.environ.get("ENGRAM_ADDRESS", "127.0.0.1:50051")})


async def main() -> None:
    async with Client(ENGRAM) as engram:
        print("tools:", [t.name for t in (await engram.list_tools()).tools])
        for turn, message in enumerate(["I'm allergic to peanuts.", "Can you suggest a snack for my flight?"]):
            recalled = (await engram.call_tool("recall", {"query": message, "top_k": 3})).structured_content
            print(message, "->", [(h["content"], h["score"]) for h in recalled["hits"]])
            answer = f"(LLM answer given {recalled['context']!r})"  # stub: no LLM needed
            await engram.call_tool("remember", {
                "content": f"Alice said: {message}", "type": "episodic", "source_ref": f"demo#{turn}",
                "used_memory_ids": [h["memory_id"] for h in recalled["hits"]]})


asyncio.run(main())
