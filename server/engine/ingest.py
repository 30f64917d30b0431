"""The Write RPC on one tenant's shard, after authorization: normalise and validate, salience (skip below the
tenant's threshold), thread chat turns, embed in the write batcher's device step (one forward pass across
tenants), commit (WAL fsync, then the indexes), audit and the capacity cap; the extractor counts turns.

:class:`EmbedStage` is the write batcher's stage: its device step is the forward pass (length-sorted chunks on
every device lane while no search waits) and answers each entry with its rows of vectors; it has no CPU step. A
text that runs a quarter of the embedder's window past it (models/embedder.py PASSAGE_MIN_REST) also gets passage
vectors of the rest (server/index/memory_vectors.py): the entry's answer is then one array a text, the main vector
first. An EPISODIC memory (a chat turn) gets narrower ones
(``advanced.turn_passage_tokens``), from half the model's window on: a sentence in a 1 KB turn that the model reads
whole is still diluted in its mean (docs/concepts/retrieval.md "Chat turns").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.base import Embedder, TokenBatch
from models.threads import torch_threads
from server.batching.batcher import Batcher, Entry, Stage
from server.batching.scheduler import embed_chunks
from server.config import ServerConfig
from server.domain import MemoryInput, MemoryType, WriteResult
from server.engine.conversation import thread_contexts
from server.engine.idempotent import Call, write_answer
from server.engine.memories import Memories
from server.engine.validation import validate_memories
from server.engine.write import commit_writes
from server.errors import DeadlineExceeded
from server.hygiene.extractor import EXTRACTOR_KEY_ID, Extractor
from server.hygiene.normalise import normalise_input
from server.hygiene.writes import SaliencePolicy
from server.store.audit import writing
from server.store.idempotency import Done
from server.tenants.shard import TenantShard
from server.text import indexed_text, without_context
from server.tracing import Tracing, traced_now

# Tokens of one chunk of a write batch's forward pass on a CPU (EmbedStage): what a search that arrives meanwhile
# may wait for. On a GPU a write batch is one chunk (CUDA runs one pass at a time anyway; server/engine/engine.py).
CHUNK_TOKENS = 2048
# A search answered this recently still counts as waiting: a client in a closed loop sends its next query a few ms
# after its answer, and a write must not take every lane in that gap.
SEARCH_HOLD_MS = 300.0


@dataclass(frozen=True)
class WriteTexts:
    """One payload of the write stage: texts to embed, and which of them are chat turns' (EPISODIC memories': the
    stage's ``turn_tokens`` windows). A plain list of texts is the same with no turns."""
    texts: list[str]
    turns: frozenset[int] = frozenset()

    @classmethod
    def of(cls, payload: list[str] | WriteTexts) -> WriteTexts:
        return payload if isinstance(payload, WriteTexts) else cls(payload)


class EmbedStage(Stage[list[str] | WriteTexts, None]):
    """Embeds every text of a batch (passages: an asymmetric model's passage prefix) and answers each entry with
    its rows of vectors.

    The texts are tokenized once, then run as length-sorted chunks of at most ``chunk_tokens`` tokens
    (scheduler.embed_chunks) on up to ``lanes`` device threads at once, each chunk with ``idle_threads`` torch
    threads (0: the device thread's own). That holds while no search is waiting (``search_waiting``); while one
    is, the chunks run one at a time with the device thread's own threads, so a search waits for at most one
    chunk before a device thread is its own, and the write keeps the rest. A bulk import alone thus uses every
    core, where one forward pass of a whole Write on one device thread left the others idle.

    Passage windows (:meth:`_tokenize`): a text cut at the model's window, by at least the embedder's
    ``passage_min_rest`` tokens (a quarter of the window), gets up to ``passages`` of the embedder's own width
    (``advanced.passage_tokens``); a chat turn's text (:class:`WriteTexts` ``turns``) longer
    than the embedder's ``windows_from(turn_tokens)`` gets up to ``turn_passages`` of ``turn_tokens`` (``turn_tokens``
    0: as any other text; ``turn_passages`` 0: none)."""

    def __init__(self, *, embedder: Embedder, device_pool: Executor, tokenize_pool: Executor | None = None,
                 lanes: int = 1, idle_threads: int = 0, chunk_tokens: int = CHUNK_TOKENS,
                 search_waiting: Callable[[], bool] = lambda: False, passages: int = 0, turn_tokens: int = 0,
                 turn_passages: int = 0) -> None:
        self.embedder = embedder
        self.passages = passages   # passage vectors a long text gets at most (advanced.passage_vectors; 0 = none)
        self.turn_tokens = turn_tokens   # a chat turn's window width (advanced.turn_passage_tokens; 0 = as others)
        self.turn_passages = turn_passages   # ... and its passage vectors at most (advanced.turn_passage_vectors)
        self.device_pool = device_pool
        self.tokenize_pool = tokenize_pool or device_pool
        self.lanes = max(1, lanes)
        self.idle_threads = idle_threads
        self.chunk_tokens = chunk_tokens
        self.search_waiting = search_waiting
        self._running = 0   # chunks on the device, across this stage's batches
        self._lane_free: asyncio.Condition | None = None
        self.chunks_wide = 0   # chunks that ran at the idle width (every lane, idle_threads)

    async def device(self, batch: list[Entry[list[str] | WriteTexts]]) -> None:
        prefix = getattr(self.embedder, "passage_prefix", "")   # asymmetric models (e5): "passage: "
        payloads = [WriteTexts.of(entry.payload) for entry in batch]
        texts: list[str] = []
        turns: set[int] = set()
        for payload in payloads:
            turns.update(len(texts) + i for i in payload.turns)
            texts += [prefix + t for t in payload.texts]
        loop = asyncio.get_running_loop()
        tokens, owners = await loop.run_in_executor(self.tokenize_pool, self._tokenize, texts, frozenset(turns))
        chunks = embed_chunks(tokens.lengths.tolist(), max_tokens=self.chunk_tokens, parts=self.lanes)
        parts = await asyncio.gather(*(self._chunk(tokens, rows) for rows in chunks))
        vectors = np.empty((len(tokens), self.embedder.dim), dtype=np.float32)
        for rows, part in zip(chunks, parts, strict=True):
            vectors[rows] = part
        sets = with_passages(vectors, owners, len(texts))
        start = 0
        for entry, payload in zip(batch, payloads, strict=True):
            entry.resolve(sets[start:start + len(payload.texts)])
            start += len(payload.texts)

    def _tokenize(self, texts: list[str], turns: frozenset[int] = frozenset()) -> tuple[TokenBatch, list[int]]:
        """The texts' rows (cut at the embedder's window), then the passage windows of the texts that get them
        (:meth:`window_groups`), and for each window the text it belongs to. A text too short for windows costs
        one length comparison; windows cover a memory's header and content, never its context (the previous turn:
        a memory of its own, with its own vectors), so a short turn threaded to a long one gets none."""
        tokens = self.embedder.tokenize(texts)
        windows = getattr(self.embedder, "passage_windows", None)   # a remote stand-in has none
        if not self.passages or windows is None:
            return tokens, []
        owners, extra = [], []
        for group, width, limit in self.window_groups(tokens.lengths.tolist(), turns):
            bare = [without_context(texts[i]) for i in group]
            for i, rows in zip(group, windows(bare, limit=limit, width=width), strict=True):
                owners += [i] * len(rows)
                extra += rows
        if not extra:
            return tokens, []
        return TokenBatch(input_ids=tokens.input_ids + tuple(extra),
                          token_type_ids=tokens.token_type_ids + tuple(np.zeros_like(r) for r in extra)), owners

    def window_groups(self, lengths: list[int], turns: frozenset[int]) -> list[tuple[list[int], int | None, int]]:
        """``(texts, window width, windows at most)`` of each kind of text that may get passage windows, from the
        texts' row ``lengths`` (cut at the model's window): a chat turn (index in ``turns``, when ``turn_tokens``
        is set) longer than the embedder's ``windows_from(turn_tokens)``, at ``turn_tokens`` (up to
        ``turn_passages``; 0: none); every other text cut at the model's window, at the embedder's own width
        (None) — the rule before chat turns had their own, unchanged. The embedder skips a text whose header and
        content alone are too short. Pure."""
        whole = self.embedder.max_length
        turns = turns if self.turn_tokens else frozenset()
        windows_from = getattr(self.embedder, "windows_from", lambda width: whole)
        past = min(whole, windows_from(self.turn_tokens) + 1)
        groups = [([i for i, n in enumerate(lengths) if i not in turns and n >= whole], None, self.passages),
                  ([i for i in sorted(turns) if lengths[i] >= past], self.turn_tokens, self.turn_passages)]
        return [g for g in groups if g[0] and g[2] > 0]

    async def _chunk(self, tokens: TokenBatch, rows: list[int]) -> np.ndarray:
        if self._lane_free is None:
            self._lane_free = asyncio.Condition()
        async with self._lane_free:
            await self._lane_free.wait_for(lambda: self._running < (1 if self.search_waiting() else self.lanes))
            self._running += 1
            wide = not self.search_waiting()
        part = TokenBatch(input_ids=tuple(tokens.input_ids[i] for i in rows),
                          token_type_ids=tuple(tokens.token_type_ids[i] for i in rows))
        threads = self.idle_threads if wide else 0
        self.chunks_wide += wide
        try:
            return await asyncio.get_running_loop().run_in_executor(self.device_pool, self._forward, part, threads)
        finally:
            async with self._lane_free:
                self._running -= 1
                self._lane_free.notify_all()

    def _forward(self, part: TokenBatch, threads: int) -> np.ndarray:
        with torch_threads(threads):
            return self.embedder.forward(part)


def with_passages(vectors: np.ndarray, owners: list[int], n: int) -> np.ndarray | list[np.ndarray]:
    """``vectors``: n texts' rows, then passage rows each owned by ``owners[j]``. Without passages the ``(n, dim)``
    rows as they are; else one array a text: ``(dim,)``, or ``(1 + passages, dim)`` with its main vector first."""
    if not owners:
        return vectors[:n]
    extra: dict[int, list[int]] = {}
    for j, owner in enumerate(owners):
        extra.setdefault(owner, []).append(n + j)
    return [vectors[i] if i not in extra else vectors[[i, *extra[i]]] for i in range(n)]


class Ingest:
    def __init__(self, *, config: ServerConfig, batcher: Batcher[list[str] | WriteTexts], memories: Memories,
                 salience: SaliencePolicy, min_salience: Callable[[str], float | None], write_pool: Executor,
                 tokens: Callable[[Sequence[str]], int], check_space: Callable[[], None],
                 clock: Callable[[], int], extractor: Extractor, tracing: Tracing | None = None) -> None:
        self.config = config
        self.tracing = tracing   # None: off
        self.extractor = extractor
        self.batcher = batcher
        self.memories = memories
        self.salience = salience
        self.min_salience = min_salience   # tenant id → its threshold (its own setting, else the server's)
        self.write_pool = write_pool
        self.tokens = tokens
        self.check_space = check_space
        self.clock = clock

    async def embed(self, tenant_id: str, texts: list[str], *, turns: bool = False) -> np.ndarray | list[np.ndarray]:
        """Each text's vector (a row), or its main and passage vectors (with_passages); ``turns``: the texts are
        chat turns' (EPISODIC memories': their windows, as :meth:`write` embeds them)."""
        payload = WriteTexts(texts, frozenset(range(len(texts))) if turns else frozenset())
        return await self.batcher.submit(tenant_id=tenant_id, tokens=self.tokens(texts), payload=payload,
                                         deadline_ns=None)

    async def write(self, shard: TenantShard, memories: Sequence[MemoryInput], *, key_id: str,
                    deadline_ns: int | None = None, call: Call | None = None) -> list[WriteResult]:
        """``call``: an idempotent Write (server/engine/idempotent.py): its answer (every input's result,
        skipped ones too) is committed in the memories' log group; alone when every input was skipped. Lucene's
        refresh of the Writes before waits for this one meanwhile (TenantShard.write_coming)."""
        with shard.write_coming():
            return await self._write(shard, memories, key_id=key_id, deadline_ns=deadline_ns, call=call)

    async def _write(self, shard: TenantShard, memories: Sequence[MemoryInput], *, key_id: str,
                     deadline_ns: int | None, call: Call | None) -> list[WriteResult]:
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
        turns = frozenset(i for i, m in enumerate(memories) if m.type == MemoryType.EPISODIC)
        submit = self.batcher.submit(tenant_id=shard.tenant_id, tokens=self.tokens(texts),
                                     payload=WriteTexts(texts, turns), deadline_ns=deadline_ns)
        trace = None
        if traced_now(self.tracing):
            assert self.tracing is not None
            with self.tracing.span("engram.embed", attributes={"engram.memories": len(texts)}):   # queue included
                vectors: np.ndarray | list[np.ndarray] = await submit
            trace = self.tracing.current()
        else:
            vectors = await submit
        # The caller has stopped waiting when the deadline passed during the embedding: the Write changes nothing
        # (the queue checks the deadline only on entry, and a client's grpc-timeout may outlast that by microseconds).
        if deadline_ns is not None and time.monotonic_ns() >= deadline_ns:
            raise DeadlineExceeded("deadline passed before the write was committed")
        results = await asyncio.get_running_loop().run_in_executor(
            self.write_pool, self.commit, shard, memories, vectors, key_id, None if call is None else done, trace)
        self.extractor.note_write(shard, memories, results)   # counts turns; an extraction runs in the background
        return answer(results)

    def commit(self, shard: TenantShard, memories: Sequence[MemoryInput], vectors: np.ndarray | list[np.ndarray],
               key_id: str = "", done: Callable[[list[WriteResult]], Done] | None = None,
               trace: Any = None) -> list[WriteResult]:
        """``trace``: the traced request's context (server/tracing.py): a commit span, the log and index
        stages under it."""
        if trace is None or self.tracing is None:
            return self._commit(shard, memories, vectors, key_id, done, None)
        marks: list[tuple[str, int, int]] = []
        with self.tracing.span("engram.commit", parent=trace, attributes={"engram.memories": len(memories)}):
            results = self._commit(shard, memories, vectors, key_id, done, marks)
            self.tracing.stages(marks)
        return results

    def _commit(self, shard: TenantShard, memories: Sequence[MemoryInput], vectors: np.ndarray | list[np.ndarray],
                key_id: str,
                done: Callable[[list[WriteResult]], Done] | None, marks: list[tuple[str, int, int]] | None,
                ) -> list[WriteResult]:
        with shard.write_lock:
            shard.check_live()
            now = self.clock()
            with writing(key_id=key_id, at_ms=now):   # the commit records its WRITE line's key id and time
                results = commit_writes(shard, memories, vectors, cfg=self.config.memory, now_ms=now, done=done,
                                        marks=marks)
            self.memories.after_write_locked(shard, memories, results, key_id=key_id, now_ms=now)
            return results

    def commit_answer(self, shard: TenantShard, done: Done) -> None:
        """An idempotent Write that stored nothing (every input skipped): its answer alone."""
        with shard.write_lock:
            shard.check_live()
            shard.apply(done=done)
