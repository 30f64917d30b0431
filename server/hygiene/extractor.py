"""The optional model-backed extractor (``memory.extractor_url``, off by default). After every
``EXTRACT_EVERY_TURNS`` episodic turns of a conversation — counted as writes commit, on the event
loop, without waiting for anything — a background task sends the conversation's last ``EXTRACT_WINDOW``
turns to an OpenAI-compatible chat endpoint and writes the facts it returns (:mod:`.extract_parse`) as
SEMANTIC memories in one Write: ``source_refs`` = the turns' memory ids, the model's confidence (below
``server.engine.write.PENDING_BELOW_CONFIDENCE`` → PENDING, as for any write). The facts also become extra key text of
their source turns ("fact-augmented keys": appended to the turn's indexed context and re-embedded), so a
question phrased like the fact finds the turn.

A failed call, a timeout or a malformed reply is logged and retried with exponential backoff (0.5 s, 1 s,
2 s, …) up to ``EXTRACTOR_RETRIES`` times; after that the window is left for the next trigger (the
turn counter is only reset by a success), so nothing is lost and nothing is half-written. A conversation is
the part of a turn's ``source_ref`` before its last ``#`` (what the SDK's ``write_conversation`` writes),
else its ``scope``.

The same endpoint reviews new statements' update links (:mod:`.link_review`): :meth:`Extractor.call` is the one round
trip with its retries, and :meth:`Extractor.note_write` counts a Write's turns for the one and queues its new
statements for the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from server.config import MemoryConfig
from server.domain import Extraction, Memory, MemoryInput, MemoryStatus, MemoryType, WriteOutcome, WriteResult
from server.errors import FailedPrecondition, NotReady
from server.hygiene.extract_parse import Fact, MalformedReply, parse_facts, reply_content, request_body
from server.hygiene.link_review import Link, LinkReviewer, ShardOf
from server.tenants.shard import TenantShard
from server.text import memory_text

log = logging.getLogger(__name__)
T = TypeVar("T")

WriteFacts = Callable[[str, list[MemoryInput]], Awaitable[list[WriteResult]]]
Embed = Callable[[str, list[str]], Awaitable[np.ndarray]]
FACTS_MARK = "\n[facts] "
# The key id the extractor's writes carry: a tenant's min_salience does not skip them (the model drew them from
# stored turns, and each is appended to its turns' keys either way).
EXTRACTOR_KEY_ID = "engram-extractor"
BACKOFF_S = 0.5
# When the optional extractor runs and what it sends: after every EXTRACT_EVERY_TURNS episodic turns of a
# conversation, its last EXTRACT_WINDOW turns (each window overlaps the previous one by two turns); one request
# may take EXTRACTOR_TIMEOUT_S and is tried EXTRACTOR_RETRIES more times with backoff (0.5, 1, 2 s) before the
# turns wait for the next trigger. The tests drive them against a scripted endpoint (tests/integration).
EXTRACT_EVERY_TURNS = 8
EXTRACT_WINDOW = 10
EXTRACTOR_TIMEOUT_S = 30.0
EXTRACTOR_RETRIES = 3


def conversation_of(m: Memory) -> str:
    return m.source_ref.rsplit("#", 1)[0] if "#" in m.source_ref else m.scope


class Extractor:
    def __init__(self, *, cfg: MemoryConfig, write: WriteFacts, embed: Embed, max_context_bytes: int,
                 write_pool: Executor, link: Link, shard_of: ShardOf) -> None:
        self.cfg = cfg
        self.write_pool = write_pool
        self.enabled = bool(cfg.extractor_url)
        self.write = write
        self.embed = embed
        self.max_context_bytes = max_context_bytes
        self._counts: dict[tuple[str, str], int] = {}
        self._running: dict[tuple[str, str], asyncio.Task[Extraction]] = {}
        self._http = ThreadPoolExecutor(max_workers=2, thread_name_prefix="extractor") if self.enabled else None
        self.failures = 0
        # The model also reviews new statements' update links (server/hygiene/link_review.py REVIEW_LINKS).
        self.reviewer = LinkReviewer(cfg=cfg, call=self.call, link=link, shard_of=shard_of, write_pool=write_pool)

    # -- the trigger (event loop, after a committed write) -------------------------------------------------
    def note_write(self, shard: TenantShard, inputs: Sequence[MemoryInput], results: Sequence[WriteResult]) -> None:
        if not self.enabled:
            return
        self.reviewer.note_write(shard, inputs, results)
        for inp, r in zip(inputs, results, strict=True):
            if inp.type != MemoryType.EPISODIC or r.outcome == WriteOutcome.SKIPPED:
                continue
            memory = shard.store.get(r.memory_id)
            if memory is None:
                continue
            key = (shard.tenant_id, conversation_of(memory))
            self._counts[key] = self._counts.get(key, 0) + 1
            if self._counts[key] >= EXTRACT_EVERY_TURNS and key not in self._running:
                task = asyncio.get_running_loop().create_task(self._background(shard, key))
                self._running[key] = task

    async def _background(self, shard: TenantShard, key: tuple[str, str]) -> Extraction:
        try:
            return await self.extract(shard, conversation=key[1])
        except Exception:   # logged; the counter stays, so the next turn triggers another try
            log.exception("extraction for tenant %s conversation %r failed", key[0], key[1])
            return Extraction()
        finally:
            self._running.pop(key, None)

    # -- one extraction -------------------------------------------------------------------------------------
    async def extract(self, shard: TenantShard, *, conversation: str, turns: int = 0) -> Extraction:
        if not self.enabled:
            raise FailedPrecondition("no extractor is configured (memory.extractor_url)")
        window = recent_turns(shard, conversation, turns or EXTRACT_WINDOW)
        if not window:
            return Extraction()
        texts = [m.content for m in window]
        facts = await self._ask(texts)
        key = (shard.tenant_id, conversation)
        if not facts:
            self._counts[key] = 0
            return Extraction()
        inputs = [MemoryInput(content=f.content, type=MemoryType.SEMANTIC, confidence=f.confidence,
                              source_ref=window[f.turns[0] - 1].source_ref, scope=window[f.turns[0] - 1].scope,
                              source_refs=tuple(window[n - 1].memory_id for n in f.turns),
                              metadata={"extracted": f.kind, "extractor": self.cfg.extractor_model}) for f in facts]
        results = await self.write(shard.tenant_id, inputs)
        self._counts[key] = 0   # only a written extraction resets the count: a failed one is tried again
        await self._augment(shard, window, facts)
        ids = tuple(r.memory_id for r in results if r.memory_id)
        pending = sum(r.status == MemoryStatus.PENDING for r in results)
        log.info("tenant %s: %d facts extracted from %d turns (%d pending)", shard.tenant_id, len(facts),
                 len(window), pending)
        return Extraction(memory_ids=ids, facts=len(facts), pending=pending)

    async def _ask(self, turns: list[str]) -> list[Fact]:
        return await self.call(request_body(model=self.cfg.extractor_model, turns=turns),
                               lambda content: parse_facts(content, turns=turns))

    async def call(self, request: dict, parse: Callable[[str], T]) -> T:
        """One chat completion, its message content parsed by ``parse``; a failed call, a timeout or a malformed reply
        (``parse`` raising MalformedReply or ValueError) is retried with backoff, then NotReady."""
        assert self._http is not None
        body = json.dumps(request).encode()
        loop = asyncio.get_running_loop()
        last = ""
        for attempt in range(EXTRACTOR_RETRIES + 1):
            if attempt:
                await asyncio.sleep(BACKOFF_S * 2 ** (attempt - 1))
            try:
                raw = await loop.run_in_executor(self._http, self._post, body)
                return parse(reply_content(raw))
            except (OSError, MalformedReply, ValueError) as exc:   # URLError, timeouts, HTTP errors are OSErrors
                last = f"{type(exc).__name__}: {exc}"
                log.warning("extractor attempt %d of %d failed: %s", attempt + 1, EXTRACTOR_RETRIES + 1, last)
        self.failures += 1
        raise NotReady(f"the extractor endpoint failed {EXTRACTOR_RETRIES + 1} times; last: {last[:200]}")

    def _post(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.cfg.extractor_key:
            headers["Authorization"] = f"Bearer {self.cfg.extractor_key}"
        request = urllib.request.Request(self.cfg.extractor_url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=EXTRACTOR_TIMEOUT_S) as reply:  # noqa: S310 (configured URL)
            return reply.read(4 << 20)

    async def _augment(self, shard: TenantShard, window: list[Memory], facts: list[Fact]) -> None:
        """Fact-augmented keys: each source turn's context gains the facts drawn from it, re-embedded."""
        extra: dict[str, list[str]] = {}
        for f in facts:
            for n in f.turns:
                extra.setdefault(window[n - 1].memory_id, []).append(f.content)
        changed = []
        for m in window:
            add = [t for t in extra.get(m.memory_id, ()) if t not in m.context]
            if add:
                context = (m.context + FACTS_MARK + "; ".join(add)).strip()
                if len(context.encode()) <= self.max_context_bytes:
                    changed.append(dataclasses.replace(m, context=context))
        if not changed:
            return
        vectors = await self.embed(shard.tenant_id, [memory_text(m) for m in changed])
        await asyncio.get_running_loop().run_in_executor(self.write_pool, _reindex, shard, changed, vectors)

    async def close(self) -> None:
        await self.reviewer.close()
        for task in list(self._running.values()):
            task.cancel()
        if self._http is not None:
            self._http.shutdown(wait=False, cancel_futures=True)


def recent_turns(shard: TenantShard, conversation: str, n: int) -> list[Memory]:
    turns = [m for m in shard.store.all() if m.type == MemoryType.EPISODIC and conversation_of(m) == conversation
             and m.status in (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED)]
    return sorted(turns, key=lambda m: (m.created_at_ms, m.doc_id))[-n:]


def _reindex(shard: TenantShard, changed: list[Memory], vectors: np.ndarray) -> None:
    """A turn whose key text changed is put again (same id and doc: the log keeps the newest vector)."""
    with shard.write_lock:
        puts = []
        for m, v in zip(changed, vectors, strict=True):
            current = shard.store.get(m.memory_id)
            if current is None or current.content != m.content:
                continue
            puts.append((dataclasses.replace(current, context=m.context), v))
        if puts:
            shard.dense.remove([m.doc_id for m, _ in puts])
            shard.apply(puts=puts)
