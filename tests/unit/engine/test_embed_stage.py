"""The write batcher's EmbedStage: each entry gets its texts' vectors (as one forward pass of them all gives),
its chunks run on every lane while no search waits and on one while one does."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from models.base import TokenBatch
from models.embedder import HFEmbedder
from models.testing import build_tiny_encoder
from server.batching.batcher import Entry
from server.engine.ingest import EmbedStage


class Watched(HFEmbedder):
    """The real tiny encoder; records how many forward passes run at once (each made to last 20 ms)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.running = self.most = 0
        self.guard = threading.Lock()

    def forward(self, batch: TokenBatch) -> Any:
        with self.guard:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.02)
            return super().forward(batch)
        finally:
            with self.guard:
                self.running -= 1


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Watched:
    path = build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))
    loaded = HFEmbedder.load(path, dtype="float32")
    return Watched(tokenizer=loaded._tokenizer, model=loaded._model, origin=loaded._origin, device=loaded._torch_device,
                   dtype=loaded._dtype, max_length=loaded.max_length, batch_size=loaded.batch_size,
                   pooling=loaded.pooling)


def _texts(n: int) -> list[str]:
    return [("a long turn about the garden and the weather " * (1 + i % 7)).strip() for i in range(n)]


def _run(stage: EmbedStage, payloads: list[list[str]]) -> list[np.ndarray]:
    async def go() -> list[np.ndarray]:
        loop = asyncio.get_running_loop()
        batch = [Entry(tenant_id="t", tokens=1, deadline_ns=None, payload=p, future=loop.create_future())
                 for p in payloads]
        await stage.device(batch)
        return [e.future.result() for e in batch]

    return asyncio.run(go())


@pytest.mark.parametrize("waiting", [False, True])
def test_vectors_match_one_pass_and_lanes_follow_search(model: Watched, waiting: bool) -> None:
    payloads = [_texts(40), _texts(23)[::-1]]
    with ThreadPoolExecutor(2) as pool:
        stage = EmbedStage(embedder=model, device_pool=pool, lanes=2, chunk_tokens=64,
                           search_waiting=lambda: waiting)
        model.most = 0
        got = _run(stage, payloads)
    for payload, vectors in zip(payloads, got, strict=True):
        np.testing.assert_allclose(vectors, model.embed(payload), atol=1e-5)
    assert model.most == (1 if waiting else 2)
    assert stage.chunks_wide == 0 if waiting else stage.chunks_wide > 2


def test_one_lane_runs_the_chunks_one_at_a_time(model: Watched) -> None:
    with ThreadPoolExecutor(2) as pool:
        stage = EmbedStage(embedder=model, device_pool=pool, lanes=1, chunk_tokens=64)
        model.most = 0
        (vectors,) = _run(stage, [_texts(30)])
    np.testing.assert_allclose(vectors, model.embed(_texts(30)), atol=1e-5)
    assert model.most == 1
