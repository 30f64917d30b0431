"""Client integrations of engram: an MCP server (``mcp``), LangChain (``langchain``) and LlamaIndex
(``llamaindex``) classes. Each is an optional extra built on the SDK (``engram_client``) alone: nothing here
imports the server, and the server imports nothing from here."""
