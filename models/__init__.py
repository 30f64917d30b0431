"""Embedder and cross-encoder behind one contract (:mod:`models.base`), plus small test models.

Importing this package loads neither torch nor transformers; the implementations are in
:mod:`models.embedder` (``HFEmbedder``) and :mod:`models.reranker` (``HFCrossEncoder``).
"""

from __future__ import annotations

from models.base import Embedder, ModelLoadError, Reranker, TextPair, TokenBatch

__all__ = ["Embedder", "ModelLoadError", "Reranker", "TextPair", "TokenBatch"]
