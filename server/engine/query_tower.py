"""The query tower: the embedder's top layers trained further for the query side alone.

The query adapter (server/engine/query_adapter.py) maps a query's finished vector linearly. A tower goes one step
deeper: a query is read by the embedder's own token embeddings and lower layers, and then by a copy of its top
layers trained on dev questions against the memories that answer them (training/query_tower.py); the mean of their
token states, normalised, is the vector the dense search takes. Memories, their vectors and the index are the frozen
embedder's as before, so a data dir searches the same with the tower on or off, and the rules that compare memory
with memory read what they read. As with the adapter, each dense hit keeps its cosine with the query's own vector
(the relevance calibration's scale) and CJK queries are centred instead, not mapped.

A folder holds ``tower.safetensors`` (the top layers' weights, float16) and ``engram_provenance.json`` (the embedder
it was trained for, where its layers start, the checksum). It loads only for that embedder.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

WEIGHTS = "tower.safetensors"
PROVENANCE = "engram_provenance.json"


def bert_layer(layer: Any, x: Any, mask: Any, *, heads: int, gelu_tanh: bool) -> Any:
    """One BERT encoder layer (a transformers ``BertLayer``'s modules, eval mode) on padded states ``x`` ``(batch,
    length, hidden)`` with ``mask`` ``(batch, length)`` marking the real tokens; training/query_tower.py trains
    through the same function."""
    import torch.nn.functional as functional

    batch, length, hidden = x.shape
    sa = layer.attention.self

    def split(t: Any) -> Any:
        return t.view(batch, length, heads, hidden // heads).transpose(1, 2)

    ctx = functional.scaled_dot_product_attention(split(sa.query(x)), split(sa.key(x)), split(sa.value(x)),
                                                  attn_mask=mask[:, None, None, :])
    x = layer.attention.output.LayerNorm(layer.attention.output.dense(ctx.transpose(1, 2).reshape(
        batch, length, hidden)) + x)
    inner = functional.gelu(layer.intermediate.dense(x), approximate="tanh" if gelu_tanh else "none")
    return layer.output.LayerNorm(layer.output.dense(inner) + x)


class QueryTower:
    """``search_vectors(texts)``: each query's tower vector (float32, unit norm), the text read as the embedder
    reads a query (its query prefix). The lower layers are the embedder's own modules, shared, not copied."""

    def __init__(self, embedder: Any, layers: Any, *, start: int, sha256: str) -> None:
        import torch

        model = embedder._model
        self.embedder = embedder
        self.embeddings = model.embeddings
        self.lower = list(model.encoder.layer[:start])
        self.layers = layers
        self.start = start
        self.sha256 = sha256
        config = model.config
        self.heads = int(config.num_attention_heads)
        self.gelu_tanh = config.hidden_act in ("gelu_new", "gelu_pytorch_tanh")   # as models/unpadded.py reads it
        self.device = next(model.parameters()).device
        self._torch = torch
        self._lock = threading.Lock()   # the tokenizer and the shared modules: one forward at a time

    def search_vectors(self, texts: Sequence[str]) -> np.ndarray:
        torch = self._torch
        prefix = getattr(self.embedder, "query_prefix", "")
        tokens = self.embedder.tokenize([prefix + t for t in texts])
        rows = tokens.input_ids
        longest = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), longest, dtype=torch.long)
        mask = torch.zeros(len(rows), longest, dtype=torch.bool)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = torch.from_numpy(np.asarray(row, dtype=np.int64))
            mask[i, :len(row)] = True
        ids, mask = ids.to(self.device), mask.to(self.device)
        with self._lock, torch.inference_mode():
            x = self.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids))
            for layer in [*self.lower, *self.layers]:
                x = bert_layer(layer, x, mask, heads=self.heads, gelu_tanh=self.gelu_tanh)
            weights = mask[..., None].to(x.dtype)
            pooled = (x * weights).sum(1) / weights.sum(1)
            return torch.nn.functional.normalize(pooled.float(), dim=-1).cpu().numpy()

    def map_all(self, texts: Sequence[str], vectors: Sequence[np.ndarray], mapped: Sequence[bool]) -> list[np.ndarray]:
        """``vectors`` with each ``mapped`` row replaced by its text's tower vector (one forward for them all)."""
        todo = [i for i, m in enumerate(mapped) if m]
        out = list(vectors)
        if todo:
            for i, vector in zip(todo, self.search_vectors([texts[i] for i in todo]), strict=True):
                out[i] = vector
        return out


def load_query_tower(folder: str | Path, *, embedder: Any) -> QueryTower | None:
    """The tower in ``folder`` when it was trained for ``embedder`` (a loaded embedder whose network can be read as a
    BERT encoder); None, with a log line, otherwise."""
    from safetensors.torch import load_file

    path = Path(folder)
    weights_path, provenance_path = path / WEIGHTS, path / PROVENANCE
    if not weights_path.is_file() or not provenance_path.is_file():
        return None
    provenance = json.loads(provenance_path.read_text(encoding="utf-8"))
    if provenance.get("embedder") != embedder.name or getattr(embedder, "_model", None) is None:
        log.info("the query tower in %s was trained for %r, not %r: not used", path, provenance.get("embedder"),
                 embedder.name)
        return None
    model = embedder._model
    start = int(provenance["start"])
    layers = copy.deepcopy(model.encoder.layer[start:])
    state = load_file(str(weights_path))
    dtype = next(model.parameters()).dtype
    layers.load_state_dict({k: v.to(dtype=dtype) for k, v in state.items()})
    layers.eval()
    raw = weights_path.read_bytes()
    return QueryTower(embedder, layers, start=start, sha256=hashlib.sha256(raw).hexdigest())
