"""engram for LlamaIndex (``pip install 'engram-grpc[llamaindex]'``): ``EngramRetriever`` and the
``EngramMemoryBlock`` of LlamaIndex's ``Memory``, built on engram's SDK."""

from __future__ import annotations

from engram_integrations.llamaindex.memory import EngramMemoryBlock
from engram_integrations.llamaindex.retrievers import EngramRetriever

__all__ = ["EngramMemoryBlock", "EngramRetriever"]
