"""The embedder and the cross-encoder as a TenantShard replica sees them: the model contract of
:mod:`models.base`, answered by the Encoder / Reranker deployments.

The engine calls ``tokenize`` on a CPU thread and ``forward`` on its device thread; here ``tokenize`` only
keeps the inputs (the deployment tokenizes them, next to its model) and ``forward`` sends them in one
handle call. The embedder's inputs ride in a :class:`models.base.TokenBatch` as their UTF-8 bytes (the write
stage splits a batch into chunks by its ``lengths``, here byte counts, and ``forward`` gets each chunk's
rows), which the deployment's ``@serve.batch`` joins with every other tenant's and replica's. Both
run on executor threads, never on the replica's event loop, so the blocking ``result()`` is allowed.

No multiplexed model id is ever set on these calls: Serve splits batches by model id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.base import TextPair, TokenBatch
from server.tracing import hop_traces

CALL_TIMEOUT_S = 120.0   # one forward pass queued behind others on a loaded 2-core box; the edge's deadline is shorter


@dataclass(frozen=True)
class Pending:
    """What ``tokenize`` hands ``forward``: the inputs, tokenized by the deployment."""

    items: tuple[Any, ...]

    def __len__(self) -> int:
        return len(self.items)


def model_info(model: Any) -> dict[str, Any]:
    """What a remote stand-in needs to know of a model (the deployments answer it)."""
    info = {"name": model.name, "device": str(model.device), "max_length": int(model.max_length),
            "describe": model.describe()}
    for attr in ("dim", "query_prefix", "passage_prefix", "near_duplicate_cosine"):
        if hasattr(model, attr):
            info[attr] = getattr(model, attr)
    return info


class _Remote:
    def __init__(self, handle: Any, method: str, info: dict[str, Any]) -> None:
        self._call = getattr(handle, method)
        self._info = info
        self.name: str = info["name"]
        self.device: str = info["device"]
        self.max_length: int = info["max_length"]

    def tokenize(self, items: Sequence[Any]) -> Pending | TokenBatch:
        return Pending(tuple(items))

    def forward(self, batch: Pending | TokenBatch) -> np.ndarray:
        if isinstance(batch, TokenBatch):
            return self._send([bytes(ids.astype(np.uint8)).decode() for ids in batch.input_ids])
        return self._send(list(batch.items))

    def _send(self, items: list[Any]) -> np.ndarray:
        if not items:
            return np.zeros((0,), dtype=np.float32)
        # The traced requests' W3C contexts ride along (empty when none is traced): each gets the deployment's span.
        return np.asarray(self._call.remote(items, hop_traces()).result(timeout_s=CALL_TIMEOUT_S), dtype=np.float32)

    def count_tokens(self, items: Sequence[Any]) -> list[int]:   # only the deployment has the tokenizer
        return [min(self.max_length, len(str(i)) // 3 + 2) for i in items]

    def warmup(self) -> None:
        pass   # the deployment warmed its model up

    def describe(self) -> dict[str, Any]:
        return {**self._info["describe"], "served_by": "ray serve deployment"}


class RemoteEmbedder(_Remote):
    def __init__(self, handle: Any, info: dict[str, Any]) -> None:
        super().__init__(handle, "embed", info)
        self._dim = int(info["dim"])
        self.query_prefix: str = info.get("query_prefix", "")
        self.passage_prefix: str = info.get("passage_prefix", "")
        if "near_duplicate_cosine" in info:
            self.near_duplicate_cosine = float(info["near_duplicate_cosine"])

    @property
    def dim(self) -> int:
        return self._dim

    def tokenize(self, items: Sequence[Any]) -> TokenBatch:
        ids = tuple(np.frombuffer(str(t).encode(), dtype=np.uint8).astype(np.int64) for t in items)
        return TokenBatch(input_ids=ids, token_type_ids=tuple(np.zeros(0, dtype=np.int64) for _ in ids))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._send(list(texts))
        return vectors.reshape(len(texts), self._dim)


class RemoteReranker(_Remote):
    def __init__(self, handle: Any, info: dict[str, Any]) -> None:
        super().__init__(handle, "score", info)

    def score(self, pairs: Sequence[TextPair]) -> np.ndarray:
        return self._send(list(pairs))


def split(flat: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """One batched forward pass's output cut back into each request's rows."""
    out, start = [], 0
    for n in sizes:
        out.append(flat[start:start + n])
        start += n
    return out
