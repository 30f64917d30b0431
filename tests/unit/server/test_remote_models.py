"""The Ray replica's embedder stand-in keeps the model contract the engine's stages rely on: ``tokenize`` gives
a TokenBatch (the write stage chunks it by ``lengths``), and ``forward`` of any subset of its rows sends exactly
those texts, in order, to the Encoder deployment (a stub handle here: no Ray), with the W3C contexts of the traced
requests the pass serves."""

from __future__ import annotations

from typing import Any

import numpy as np

from models.base import TokenBatch
from server.cluster.remote_models import RemoteEmbedder
from server.tracing import carrying


class _Handle:
    """The Encoder deployment's ``embed`` as a handle answers it: one row per text (its length, repeated)."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []
        self.traces: list[list[dict[str, str]]] = []
        self.embed = self

    def remote(self, texts: list[str], traces: list[dict[str, str]]) -> Any:
        self.sent.append(texts)
        self.traces.append(traces)
        rows = np.array([[len(t)] * 3 for t in texts], dtype=np.float32)
        return type("Reply", (), {"result": lambda _self, timeout_s: rows})()


def test_a_chunk_of_a_tokenized_batch_sends_its_own_texts() -> None:
    handle = _Handle()
    embedder = RemoteEmbedder(handle, {"name": "e", "device": "cpu", "max_length": 512, "describe": {}, "dim": 3})
    texts = ["passage: Zoë's café", "b", "a longer third text"]
    tokens = embedder.tokenize(texts)
    assert isinstance(tokens, TokenBatch) and tokens.lengths.tolist() == [len(t.encode()) for t in texts]
    rows = [2, 0]
    part = TokenBatch(input_ids=tuple(tokens.input_ids[i] for i in rows),
                      token_type_ids=tuple(tokens.token_type_ids[i] for i in rows))
    out = embedder.forward(part)
    assert handle.sent == [[texts[2], texts[0]]]
    assert out[:, 0].tolist() == [len(texts[2]), len(texts[0])]
    assert embedder.embed(texts).shape == (3, 3)
    assert handle.traces == [[], []]   # no traced request: nothing rides along


def test_the_traced_requests_contexts_ride_with_the_call() -> None:
    """What the engine sets around a forward pass on its device thread (``carrying``) reaches the deployment."""
    handle = _Handle()
    embedder = RemoteEmbedder(handle, {"name": "e", "device": "cpu", "max_length": 512, "describe": {}, "dim": 3})
    traces = [{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
              {"traceparent": "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"}]
    carrying(traces, embedder.forward, embedder.tokenize(["q"]))
    embedder.forward(embedder.tokenize(["r"]))   # outside carrying: none
    assert handle.traces == [traces, []]
