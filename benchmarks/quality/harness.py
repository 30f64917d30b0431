"""The quality harness's server and client: a real engram App (gRPC on 127.0.0.1:<free port>, the
packaged embedder, FAISS, Lucene, a temp data dir) and a thin client that ingests eval documents as
memories and runs eval queries through Search, stage by stage.

Stages are per-query switches of the Search RPC, so every stage of one data set runs against the same
ingested tenant. Every query is sent "as of" a fixed time (``scoring.now_ms``): such searches do not
record accesses, so earlier queries never change the importance or recency of later queries' hits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from benchmarks.quality.datasets import Query
from server.app import App, build_app
from server.config import load_config
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc

log = logging.getLogger(__name__)

ADMIN_KEY = "quality-harness-admin-key-0123456789"
WRITE_CHUNK = 256
QUERY_CHUNK = 64  # the server's max_queries_per_search


def clean(text: str) -> str:
    """Control characters (the server refuses them; a few SciFact abstracts have some) → spaces."""
    if all(ch.isprintable() or ch in "\n\r\t" for ch in text):
        return text
    return "".join(" " if (unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\n\r\t")
                   or ch in "\ufffe\uffff" else ch for ch in text)


@dataclass(frozen=True)
class Stage:
    """One ablation: which lists feed the ranking and what multiplies it."""

    name: str
    lexical_only: bool = False
    dense_only: bool = False
    rerank: bool = False
    rerank_depth: int = 0  # with rerank: candidates the cross-encoder sees (0: the server's default)
    decay: bool = False  # decay × importance on ("now" = the data set's now)
    half_life_s: float | None = None  # episodic half-life override (None: the server's)
    decay_floor: float | None = None  # decay floor override (None: the server's)
    temporal: bool = False  # the boost for memories inside a time the query names
    defaults: bool = False  # the server's defaults: no override at all but "as of" (or none when live)
    live: bool = False  # with defaults: no "as of" either, so accesses are recorded as a user's would be
    recency_weight: float | None = None  # recency weight override (None: the server's)
    importance_weight: float | None = None  # importance weight override (None: the server's)
    feedback: bool | None = None  # the second retrieval round for every query (True), never (False), or the server's rule


BM25 = Stage("bm25", lexical_only=True)
DENSE = Stage("dense", dense_only=True)
HYBRID = Stage("hybrid")
RERANK = Stage("hybrid+rerank", rerank=True)
DECAY = Stage("hybrid+decay", decay=True)
DEFAULTS = Stage("defaults", defaults=True)
LIVE = Stage("defaults (live)", defaults=True, live=True)
SECOND_ROUND = Stage("defaults + second round", defaults=True, feedback=True)


@dataclass
class Ingested:
    """What one tenant's ingest produced: eval ids per memory (a merge folds several into one)."""

    tenant: str
    docs_of: dict[str, list[str]] = field(default_factory=dict)  # memory id → eval doc ids
    merged: int = 0      # writes the near-duplicate rule merged into an earlier memory
    superseded: int = 0  # memories a later write of the same key and scope superseded
    updates: int = 0     # update links the writes made (WriteResult.updates: docs/concepts/updates.md)
    seconds: float = 0.0

    @property
    def memories(self) -> int:
        return len(self.docs_of)


def docs_of_hit(tenant: Ingested, hit: pb.Hit) -> list[str]:
    """The eval doc ids a hit stands for: its own writes', else (a memory the consolidation job wrote, whose id
    no write returned) those of the memories it consolidates, each once, in order."""
    own = tenant.docs_of.get(hit.memory.memory_id)
    if own is not None:
        return own
    return list(dict.fromkeys(d for m in hit.memory.consolidates for d in tenant.docs_of.get(m, ())))


class EvalServer:
    """A started App plus a client channel; use as a context manager."""

    def __init__(self, data_dir: Path, *, reranker: str = "", overrides: Mapping[str, Any] | None = None,
                 one_client: bool = False) -> None:
        # Quality is measured at the default rerank depth: the harness sends its queries in chunks for speed, and
        # the latency-target controller (search.latency_target_ms) would read each chunk as load and rerank
        # shallower. What it does under load is the serving benchmark's (README "Serving benchmark").
        # ``one_client``: the controller on, at the server's target, and every search alone, one after another,
        # as one client's questions: the depth is then what this machine's cost model gives an idle query.
        self.one_client = one_client
        self.depths_used: list[int] = []   # Timings.rerank_depth_used of every search, in order (a caller may clear it)
        settings: dict[str, Any] = {
            "listen": "127.0.0.1:0", "data_dir": data_dir, "admin_key": ADMIN_KEY,
            "memory": {"audit_searches": False}, **({} if one_client else {"search": {"latency_target_ms": 0}}),
            **(overrides or {}),
        }
        if reranker:
            settings.setdefault("models", {})["reranker"] = reranker
        # ENGRAM_* variables apply as they would to `engram serve` (e.g. ENGRAM_MODELS__RERANKER).
        self.config = load_config(env=os.environ, overrides=settings)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="quality-server", daemon=True)
        self._app: App | None = None
        self._channel: grpc.Channel | None = None
        self._metadata = [("authorization", f"Bearer {ADMIN_KEY}")]
        self.docs_of: dict[str, dict[str, list[str]]] = {}   # tenant → memory id → eval ids (every ingest)
        self.last_grid_hits: Any = None
        self.grid_hits: list[Any] = []

    async def _start_app(self) -> App:
        """The server the harness talks to (a hook: benchmarks/cluster/parity.py starts engram on Ray here)."""
        app = build_app(self.config)
        await app.start()
        return app

    def __enter__(self) -> EvalServer:
        self._thread.start()
        self._app = asyncio.run_coroutine_threadsafe(self._start_app(), self._loop).result(600)
        options = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
        self._channel = grpc.insecure_channel(f"127.0.0.1:{self._app.port}", options=options)
        self._memory = sgrpc.MemoryServiceStub(self._channel)
        self._admin = sgrpc.AdminServiceStub(self._channel)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._app is not None:
            asyncio.run_coroutine_threadsafe(self._app.stop(), self._loop).result(120)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    @property
    def has_reranker(self) -> bool:
        return bool(self.config.models.reranker)

    @property
    def default_rerank_depth(self) -> int:
        """The depth a search asking for the server's default (``rerank_depth`` 0) gets."""
        assert self._app is not None
        return self._app.engine.search_pipeline.default_rerank_depth

    @contextlib.contextmanager
    def caches_off(self) -> Iterator[None]:
        """No query embedding and no cross-encoder score comes from a cache inside the block (each search is timed
        and scored as a new question); the caches' sizes come back after it."""
        engine = self._app.engine   # type: ignore[union-attr]
        caches = (engine.pair_cache, engine.query_cache)
        sizes = [c.max_entries for c in caches]
        try:
            for cache in caches:
                cache.max_entries = 0
            yield
        finally:
            for cache, size in zip(caches, sizes, strict=True):
                cache.max_entries = size

    @contextlib.contextmanager
    def reranker_swapped(self, path: str) -> Iterator[None]:
        """The cross-encoder at ``path`` (a folder ``models.reranker`` accepts, loaded as the server loads its own)
        scores every pair inside the block, on the same index, with the same calibration; the server's own after
        it. The tenants' cached pair scores are the caller's to drop (``engine.pair_cache.forget_tenant``)."""
        from server.app import load_reranker

        engine = self._app.engine   # type: ignore[union-attr]
        pipeline = engine.search_pipeline
        config = load_config(env={}, overrides={"models": {"reranker": path, "dtype": self.config.models.dtype,
                                                           "rerank_dtype": self.config.models.rerank_dtype}})
        other = load_reranker(config, engine.device)
        assert other is not None and pipeline.scorer is not None
        saved = pipeline.reranker, pipeline.scorer.reranker, engine.reranker
        try:
            pipeline.reranker = pipeline.scorer.reranker = engine.reranker = other
            yield
        finally:
            pipeline.reranker, pipeline.scorer.reranker, engine.reranker = saved

    @contextlib.contextmanager
    def adapter_swapped(self, path: str) -> Iterator[None]:
        """The query adapter or tower in ``path`` (a folder ``models.query_adapter`` accepts, loaded as the server
        loads its own) maps every dense search's query inside the block; the server's own after it."""
        from server.engine.engine import load_query_adapter_for

        engine = self._app.engine   # type: ignore[union-attr]
        pipeline = engine.search_pipeline
        other = load_query_adapter_for(load_config(env={}, overrides={"advanced": {"query_adapter": path}}),
                                       engine.embedder)
        assert other is not None, f"no query adapter or tower for this embedder in {path}"
        saved = pipeline.query_adapter
        try:
            pipeline.query_adapter = other
            yield
        finally:
            pipeline.query_adapter = saved

    def info(self) -> spb.InfoResponse:
        return self._memory.Info(spb.InfoRequest(), metadata=self._metadata)

    def consolidate(self, tenant: Ingested) -> spb.ConsolidateResponse:
        """Runs consolidation on ``tenant`` now (what the background job does at its next tick)."""
        return self._memory.Consolidate(spb.ConsolidateRequest(tenant_id=tenant.tenant), metadata=self._metadata,
                                        timeout=600)

    def ingest(self, tenant: str, items: Sequence[tuple[str, pb.MemoryInput]]) -> Ingested:
        """Creates ``tenant`` and writes ``(eval id, memory)`` pairs in order, in chunks."""
        self._admin.CreateTenant(spb.CreateTenantRequest(tenant_id=tenant), metadata=self._metadata)
        out = Ingested(tenant=tenant)
        t0 = time.perf_counter()
        for i in range(0, len(items), WRITE_CHUNK):
            chunk = items[i:i + WRITE_CHUNK]
            for _, memory in chunk:
                memory.content = clean(memory.content)
            reply = self._memory.Write(spb.WriteRequest(tenant_id=tenant, memories=[m for _, m in chunk]),
                                       metadata=self._metadata, timeout=600)
            for (eval_id, _), result in zip(chunk, reply.results, strict=True):
                out.docs_of.setdefault(result.memory_id, []).append(eval_id)
                out.merged += result.outcome == spb.WRITE_OUTCOME_MERGED
                out.superseded += len(result.superseded)
                out.updates += len(result.updates)
        out.seconds = time.perf_counter() - t0
        self.docs_of[tenant] = out.docs_of
        log.info("%s: %d writes → %d memories (%d merged, %d superseded, %d update links) in %.1fs", tenant,
                 len(items), out.memories, out.merged, out.superseded, out.updates, out.seconds)
        return out

    def search(self, tenant: Ingested, queries: Sequence[Query], stage: Stage, *, now_ms: int, top_k: int,
               candidates: int = 0) -> dict[str, list[str]]:
        """Ranked eval doc ids per query id for one stage (a merged memory stands for all its docs; a semantic
        memory that consolidation wrote, for the docs of the turns it consolidates)."""
        return {qid: [d for h in hits for d in docs_of_hit(tenant, h)]
                for qid, hits in self.search_hits(tenant, queries, stage, now_ms=now_ms, top_k=top_k,
                                                  candidates=candidates).items()}

    def block_docs(self, tenant: Ingested, queries: Sequence[Query], *, now_ms: int, top_k: int = 5,
                   ) -> tuple[dict[str, list[str]], list[float]]:
        """What the SDK's ``recall`` at its defaults puts in front of a model: one query per Search, one client,
        ``top_k`` 5 and the server's context block (its relevance floor and size rule), "as of" ``now_ms``. Returns
        per query the eval doc ids of the hits whose text the block holds (block order) and each search's ms."""
        docs: dict[str, list[str]] = {}
        times_ms: list[float] = []
        for q in queries:
            query = pb.SearchQuery(text=clean(q.text), top_k=top_k, context_block=True, context_items=top_k, gate=True,
                                   scoring=pb.Scoring(now_ms=now_ms))
            t0 = time.perf_counter()
            reply = self._memory.Search(spb.SearchRequest(tenant_id=tenant.tenant, queries=[query]),
                                        metadata=self._metadata, timeout=600)
            times_ms.append((time.perf_counter() - t0) * 1000)
            result = reply.results[0]
            self.depths_used.append(result.timings.rerank_depth_used)
            items = [line for line in result.context_block.splitlines() if line.startswith("[")]   # "[i] (...) text"
            docs[q.id] = [d for h in result.hits if any(line.endswith(" " + " ".join(h.memory.content.split()))
                                                        for line in items) for d in docs_of_hit(tenant, h)]
        return docs, times_ms

    def search_hits(self, tenant: Ingested, queries: Sequence[Query], stage: Stage, *, now_ms: int, top_k: int,
                    candidates: int = 0) -> dict[str, list[pb.Hit]]:
        """The server's hits (with their score breakdowns) per query id for one stage."""
        if stage.defaults:
            scoring = pb.Scoring(now_ms=0 if stage.live else now_ms)
            rerank_depth = stage.rerank_depth
        else:
            scoring = pb.Scoring(disable_decay=not stage.decay, disable_importance=not stage.decay, now_ms=now_ms,
                                 disable_temporal=not stage.temporal)
            rerank_depth = stage.rerank_depth if stage.rerank else -1
        if stage.decay_floor is not None:
            scoring.decay_floor = stage.decay_floor
        if stage.half_life_s is not None:
            scoring.episodic_half_life_s = stage.half_life_s
        if stage.recency_weight is not None:
            scoring.recency_weight = stage.recency_weight
        if stage.importance_weight is not None:
            scoring.importance_weight = stage.importance_weight
        run: dict[str, list[pb.Hit]] = {}
        # Live searches go one at a time, in a fixed order, so each sees the accesses of those before it.
        chunk_size = 1 if stage.live or self.one_client else QUERY_CHUNK
        for i in range(0, len(queries), chunk_size):
            chunk = queries[i:i + chunk_size]
            request = spb.SearchRequest(tenant_id=tenant.tenant, queries=[
                pb.SearchQuery(text=clean(q.text), top_k=top_k, candidates=candidates, lexical_only=stage.lexical_only,
                               dense_only=stage.dense_only, rerank_depth=rerank_depth, scoring=scoring,
                               feedback=stage.feedback)
                for q in chunk])
            reply = self._memory.Search(request, metadata=self._metadata, timeout=600)
            for q, result in zip(chunk, reply.results, strict=True):
                run[q.id] = list(result.hits)
                self.depths_used.append(result.timings.rerank_depth_used)
        return run
