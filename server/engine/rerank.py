"""The cross-encoder stage of a search batch: tokenize the (query, memory) pairs on the CPU pool, one
forward pass on the device thread. Returns the logits and what they cost, measured inside the executors
(the wait for a busy device thread is queueing, not the cost of a pair): the rerank-depth controller's
cost model reads it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from models.base import Reranker


@dataclass(frozen=True)
class Scored:
    logits: np.ndarray   # one per pair, in order
    computed: int        # pairs the cross-encoder scored
    compute_ns: int      # their tokenization and forward pass, executor time


class PairScorer:
    def __init__(self, *, reranker: Reranker, device_pool: Executor, cpu_pool: Executor) -> None:
        self.reranker = reranker
        self.device_pool = device_pool
        self.cpu_pool = cpu_pool

    def _tokenize(self, pairs: list[tuple[str, str]]) -> tuple[object, int]:
        t0 = time.monotonic_ns()
        return self.reranker.tokenize(pairs), time.monotonic_ns() - t0

    def _forward(self, tokens: object) -> tuple[np.ndarray, int]:
        t0 = time.monotonic_ns()
        return np.asarray(self.reranker.forward(tokens), dtype=np.float64), time.monotonic_ns() - t0

    async def score(self, pairs: Sequence[tuple[str, str]], tenants: Sequence[str]) -> Scored:
        """Logits of ``pairs`` (``tenants[i]`` owns pair i)."""
        loop = asyncio.get_running_loop()
        tokens, tokenize_ns = await loop.run_in_executor(self.cpu_pool, self._tokenize, list(pairs))
        logits, forward_ns = await loop.run_in_executor(self.device_pool, self._forward, tokens)
        return Scored(logits=logits, computed=len(pairs), compute_ns=tokenize_ns + forward_ns)
