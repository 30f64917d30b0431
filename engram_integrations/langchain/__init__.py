"""engram for LangChain (``pip install 'engram-grpc[langchain]'``): ``EngramRetriever`` and
``EngramChatMessageHistory``, built on engram's SDK."""

from __future__ import annotations

from engram_integrations.langchain.chat_history import EngramChatMessageHistory
from engram_integrations.langchain.retrievers import EngramRetriever

__all__ = ["EngramChatMessageHistory", "EngramRetriever"]
