"""The Write RPC on one tenant's shard, after authorization: normalise and validate, salience (skip below the
tenant's threshold), thread chat turns, embed in the write batcher's device step (one forward pass across
tenants), commit (WAL fsync, then the indexes), audit and the capacity cap; the extractor counts turns.

:class:`EmbedStage` is the write batcher's stage: its device step is the forward pass and answers each
entry with its rows of vectors; it has no CPU step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

import numpy as np

from models.base import Embedder
from server.batching.batcher import Batcher, Entry, Stage
from server.config import ServerConfig
from server.domain import MemoryInput, MemoryType, WriteResult
from server.engine.conversation import thread_contexts
from server.engine.idempotent import Call, write_answer
from server.engine.memories import Memories
from server.engine.validation import validate_memories
from server.engine.write import commit_writes
from server.hygiene.extractor import EXTRACTOR_KEY_ID, Extractor
from server.hygiene.normalise import normalise_input
from server.hygiene.writes import SaliencePolicy
from server.store.idempotency import Done
from server.tenants.shard import TenantShard
from server.text import indexed_text


class EmbedStage(Stage[list[str], None]):
    """Embeds every text of a batch (passages: an asymmetric model's passage prefix) in one forward pass."""

    def __init__(self, *, embedder: Embedder, device_pool: Executor) -> None:
        self.embedder = embedder
        self.device_pool = device_pool

    async def device(self, batch: list[Entry[list[str]]]) -> None:
        prefix = getattr(self.embedder, "passage_prefix", "")   # asymmetric models (e5): "passage: "
        texts = [prefix + t for entry in batch for t in entry.payload]
        vectors = await asyncio.get_running_loop().run_in_executor(self.device_pool, self.embedder.embed, texts)
        start = 0
        for entry in batch:
            entry.resolve(vectors[start:start + len(entry.payload)])
            start += len(entry.payload)


class Ingest:
    def __init__(self, *, config: ServerConfig, batcher: Batcher[list[str]], memories: Memories,
                 salience: SaliencePolicy, min_salience: Callable[[str], float | None], write_pool: Executor,
                 tokens: Callable[[Sequence[str]], int], check_space: Callable[[], None],
                 clock: Callable[[], int], extractor: Extractor) -> None:
        self.config = config
        self.extractor = extractor
        self.batcher = batcher
        self.memories = memories
        self.salience = salience
        self.min_salience = min_salience   # tenant id → its threshold (its own setting, else the server's)
        self.write_pool = write_pool
        self.tokens = tokens
        self.check_space = check_space
        self.clock = clock

    async def embed(self, tenant_id: str, texts: list[str]) -> np.ndarray:
        return await self.batcher.submit(tenant_id=tenant_id, tokens=self.tokens(texts), payload=texts,
                                         deadline_ns=None)

    async def write(self, shard: TenantShard, memories: Sequence[MemoryInput], *, key_id: str,
                    deadline_ns: int | None = None, call: Call | None = None) -> list[WriteResult]:
        """``call``: an idempotent Write (server/engine/idempotent.py): its answer (every input's result,
        skipped ones too) is committed in the memories' log group; alone when every input was skipped."""
        memories = [normalise_input(m, where=f"memories[{i}]") for i, m in enumerate(memories)]
        validate_memories(memories, limits=self.config.limits)
        # salience; below the tenant's min_salience (else memory.min_salience): skipped, but not the extractor's facts
        threshold = 0.0 if key_id == EXTRACTOR_KEY_ID else self.min_salience(shard.tenant_id)
        prepared = self.salience.prepare(memories, min_salience=threshold)

        def answer(stored: Sequence[WriteResult]) -> list[WriteResult]:
            return self.salience.assemble(prepared, stored)

        def done(stored: list[WriteResult]) -> Done:
            assert call is not None
            return call.done(write_answer(answer(stored)), at_ms=self.clock())

        if not prepared.inputs:
            if call is not None:
                await asyncio.get_running_loop().run_in_executor(self.write_pool, self.commit_answer, shard,
                                                                 done([]))
            return answer([])
        memories = prepared.inputs
        self.check_space()
        now = self.clock()
        # A chat turn written alone is indexed with the turn before it (server/engine/conversation.py).
        memories = thread_contexts(shard.store, memories, window_ms=int(self.config.memory.thread_window_s * 1000),
                                   now_ms=now)
        texts = [indexed_text(m.content, dated=m.type == MemoryType.EPISODIC, created_at_ms=m.created_at_ms or now,
                              entities=m.entities, context=m.context) for m in memories]
        vectors: np.ndarray = await self.batcher.submit(
            tenant_id=shard.tenant_id, tokens=self.tokens(texts), payload=texts, deadline_ns=deadline_ns)
        results = await asyncio.get_running_loop().run_in_executor(
            self.write_pool, self.commit, shard, memories, vectors, key_id, None if call is None else done)
        self.extractor.note_write(shard, memories, results)   # counts turns; an extraction runs in the background
        return answer(results)

    def commit(self, shard: TenantShard, memories: Sequence[MemoryInput], vectors: np.ndarray,
               key_id: str = "", done: Callable[[list[WriteResult]], Done] | None = None) -> list[WriteResult]:
        with shard.write_lock:
            shard.check_live()
            now = self.clock()
            results = commit_writes(shard, memories, vectors, cfg=self.config.memory, now_ms=now, done=done)
            self.memories.after_write_locked(shard, memories, results, key_id=key_id, now_ms=now)
            return results

    def commit_answer(self, shard: TenantShard, done: Done) -> None:
        """An idempotent Write that stored nothing (every input skipped): its answer alone."""
        with shard.write_lock:
            shard.check_live()
            shard.apply(done=done)
