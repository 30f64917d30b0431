"""The cross-encoder stage of a search batch: pairs the pair-score cache knows are answered from it; the
rest are tokenized on the CPU pool and scored in one forward pass on the device thread. Returns the logits and what they cost, measured inside the executors
(the wait for a busy device thread is queueing, not the cost of a pair): the rerank-depth controller's
cost model reads it. Before the pass, :meth:`PairScorer.pair_tokens` prices candidate pairs in the cross-encoder's
tokens, from per-text counts cached by the text, so the controller can fit the depth to its budget."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from models.base import Reranker
from models.threads import torch_threads
from server.batching.pair_cache import PairScoreCache, pair_key
from server.tracing import carrying

# A typical (query, memory) pair: what the cost model is seeded with before the first batch measures its own.
SAMPLE_QUERY = "what did the team decide about the launch date"
SAMPLE_MEMORY = ("Note {i}: the team met on Tuesday and agreed to move the launch of the mobile app to the second "
                 "week of March, after the security review found two open issues in the login flow.")


# Texts whose token count is kept (by the text's hash: ~100 bytes each, never the text): a tenant's reranked
# memories come back query after query, and a 1 KB memory takes ~0.1 ms to count.
TEXT_TOKEN_ENTRIES = 65536


@dataclass(frozen=True)
class Scored:
    logits: np.ndarray   # one per pair, in order
    computed: int        # pairs the cross-encoder scored (the others came from the cache)
    compute_ns: int      # their tokenization and forward pass, executor time
    tokens: int = 0      # the scored pairs' tokens, as the cross-encoder read them


class PairScorer:
    def __init__(self, *, reranker: Reranker, device_pool: Executor, cpu_pool: Executor,
                 cache: PairScoreCache | None = None) -> None:
        self.reranker = reranker
        self.device_pool = device_pool
        self.cpu_pool = cpu_pool
        self.cache = cache
        self._text_tokens: dict[int, int] = {}   # hash(text) -> tokens of (text, "") as the cross-encoder encodes it
        self._specials: int | None = None        # tokens of ("", ""): the special tokens a pair adds
        self._lock = threading.Lock()

    def _text_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of ``(text, "")`` per text (special tokens included, truncated as the model truncates), counted
        once per text and kept in a bounded table."""
        keys = [hash(t) for t in texts]
        with self._lock:
            known = [self._text_tokens.get(k) for k in keys]
        todo = {k: t for k, t, n in zip(keys, texts, known, strict=True) if n is None}
        if todo:
            counted = dict(zip(todo, self.reranker.count_tokens([(t, "") for t in todo.values()]), strict=True))
            with self._lock:
                for k, n in counted.items():
                    self._text_tokens[k] = int(n)
                for old in list(self._text_tokens)[:max(0, len(self._text_tokens) - TEXT_TOKEN_ENTRIES)]:
                    del self._text_tokens[old]   # the oldest first (insertion order)
            known = [counted[k] if n is None else n for k, n in zip(keys, known, strict=True)]
        return [int(n) for n in known]  # type: ignore[arg-type]

    def pair_tokens(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        """Each pair's tokens as the cross-encoder reads it: the query's and the memory's counts less the special
        tokens counted twice, capped at the model's ``max_length`` (it truncates the longer side of a pair).
        Equal to the lengths :meth:`Reranker.tokenize` gives (tested), without tokenizing the pairs."""
        if not pairs:
            return []
        if self._specials is None:
            self._specials = int(self.reranker.count_tokens([("", "")])[0])
        queries = self._text_counts([q for q, _ in pairs])
        memories = self._text_counts([m for _, m in pairs])
        limit = int(self.reranker.max_length)
        return [min(limit, q + m - self._specials) for q, m in zip(queries, memories, strict=True)]

    def _lookup_and_tokenize(self, pairs: Sequence[tuple[str, str]], tenants: Sequence[str],
                             ) -> tuple[list, list[float | None], object, int]:
        """(keys, cached logits or None, tokens of the uncached pairs, their tokenization ns)."""
        use = self.cache is not None and self.cache.enabled
        keys = [pair_key(t, q, m) for t, (q, m) in zip(tenants, pairs, strict=True)] if use else []
        cached: list[float | None] = self.cache.get_many(keys) if use else [None] * len(pairs)  # type: ignore[union-attr]
        todo = [pair for pair, logit in zip(pairs, cached, strict=True) if logit is None]
        if not todo:
            return keys, cached, None, 0
        t0 = time.monotonic_ns()
        return keys, cached, self.reranker.tokenize(todo), time.monotonic_ns() - t0

    def _forward(self, tokens: object, threads: int) -> tuple[np.ndarray, int]:
        t0 = time.monotonic_ns()
        with torch_threads(threads):
            logits = self.reranker.forward(tokens)
        return np.asarray(logits, dtype=np.float64), time.monotonic_ns() - t0

    def sample_ms(self, pairs: int, threads: int = 0) -> tuple[float, int]:
        """Milliseconds of one pass over ``pairs`` typical pairs, tokenization included, with ``threads`` torch
        threads (0: as set), and the pass's tokens. Call it on the device thread."""
        items = [(SAMPLE_QUERY, SAMPLE_MEMORY.format(i=i)) for i in range(pairs)]
        t0 = time.monotonic_ns()
        tokens = self.reranker.tokenize(items)
        self._forward(tokens, threads)
        return (time.monotonic_ns() - t0) / 1e6, self._tokens_of(tokens, items)

    def _tokens_of(self, tokens: object, pairs: Sequence[tuple[str, str]]) -> int:
        """A tokenized pass's tokens: its lengths (a local model's TokenBatch), else the counted pair lengths."""
        lengths = getattr(tokens, "lengths", None)
        return int(np.sum(lengths)) if lengths is not None else sum(self.pair_tokens(pairs))

    async def score(self, pairs: Sequence[tuple[str, str]], tenants: Sequence[str], *, threads: int = 0,
                    traces: Sequence[Mapping[str, str]] = ()) -> Scored:
        """Logits of ``pairs`` (``tenants[i]`` owns pair i); ``threads``: torch threads of the forward pass
        (0: the device thread's setting; the pass runs on a device thread); ``traces``: the W3C contexts of the
        traced requests the pass serves, for a Ray hop to pass on (server/tracing.py ``carrying``)."""
        loop = asyncio.get_running_loop()
        keys, cached, tokens, tokenize_ns = await loop.run_in_executor(self.cpu_pool, self._lookup_and_tokenize,
                                                                       pairs, tenants)
        missing = [i for i, logit in enumerate(cached) if logit is None]
        logits = np.array([np.nan if v is None else v for v in cached], dtype=np.float64)
        if not missing:
            return Scored(logits=logits, computed=0, compute_ns=0)
        fresh, forward_ns = await loop.run_in_executor(self.device_pool, carrying, traces, self._forward, tokens,
                                                       threads)
        logits[missing] = fresh
        if keys:
            self.cache.put_many([keys[i] for i in missing], fresh.tolist())
        return Scored(logits=logits, computed=len(missing), compute_ns=tokenize_ns + forward_ns,
                      tokens=self._tokens_of(tokens, [pairs[i] for i in missing]))
