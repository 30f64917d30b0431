"""Builds (once) and caches the serving benchmark's data directories under ``benchmarks/.cache/serving``.

Embedding 100k memories with MiniLM on two shared CPU cores takes close to an hour, so memories are made
of sentences from a fixed pool: every pool sentence is embedded once with the real packaged embedder,
and a memory's vector is the L2-normalised mean of its sentences' vectors (an approximation of
embedding the whole text; exact FAISS search costs the same for any vectors). Memories are written
offline through the tenant shard API (WAL + FAISS + Lucene, exactly what a Write commits), in large
groups, without the per-write near-duplicate checks (the texts are distinct by construction).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from pathlib import Path

import numpy as np

from benchmarks.serving.corpus import memories, sentence_pool
from server.domain import Memory, MemoryStatus, MemoryType
from server.tenants.catalog import Catalog
from server.tenants.registry import TenantRegistry

log = logging.getLogger(__name__)

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "serving"
ADMIN_KEY = "bench-admin-key-0123456789abcdef"
POOL_SIZE = 6000
DAY_MS = 86_400_000


def pool_vectors(embedder, *, size: int = POOL_SIZE) -> tuple[list[str], np.ndarray]:  # type: ignore[no-untyped-def]
    pool = sentence_pool(size)
    path = CACHE / f"pool-{size}-{embedder.name.replace('/', '_')}.npy"
    if path.is_file():
        return pool, np.load(path)
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    prefix = getattr(embedder, "passage_prefix", "")   # as the write path embeds memories
    vectors = np.concatenate([embedder.embed([prefix + t for t in pool[i:i + 256]]) for i in range(0, len(pool), 256)])
    np.save(path, vectors)
    log.info("embedded %d pool sentences in %.1fs", len(pool), time.perf_counter() - started)
    return pool, vectors


def tenant_name(i: int) -> str:
    return f"bench-{i:03d}"


def dataset_dir(*, tenants: int, per_tenant: int, embedder: str = "") -> Path:
    """One cache per embedder (``models.embedder``'s default when not named): vectors of two models never mix."""
    from server.config import ModelsConfig

    slug = (embedder or ModelsConfig().embedder or "minilm").replace("/", "_")
    return CACHE / f"data-t{tenants}-m{per_tenant}-{slug}"


def build(embedder, *, tenants: int, per_tenant: int, chunk: int = 5000) -> Path:  # type: ignore[no-untyped-def]
    """The data directory for ``tenants`` × ``per_tenant`` memories, built unless already cached."""
    from server import lexical
    from server.app import guard_vector_space

    directory = dataset_dir(tenants=tenants, per_tenant=per_tenant)
    if (directory / "complete.json").is_file():
        return directory
    if directory.exists():
        shutil.rmtree(directory)
    lexical.start(heap_mb=2048)
    pool, pool_vecs = pool_vectors(embedder)
    started = time.perf_counter()
    catalog = Catalog(directory / "system")
    catalog.ensure_admin_key(ADMIN_KEY)
    guard_vector_space(directory, embedder)   # records the embedder, as a server's first start would
    registry = TenantRegistry(data_dir=directory, catalog=catalog, dim=pool_vecs.shape[1])
    now = int(time.time() * 1000)
    for t in range(tenants):
        name = tenant_name(t)
        registry.create(name)
        shard = registry.shard(name)
        rng = random.Random(t)
        items = memories(per_tenant, pool, seed=1000 + t)
        for start in range(0, per_tenant, chunk):
            part = items[start:start + chunk]
            doc_ids = shard.store.allocate_doc_ids(len(part))
            puts = []
            for (text, parts), doc in zip(part, doc_ids, strict=True):
                vec = pool_vecs[parts].mean(axis=0)
                vec = (vec / np.linalg.norm(vec)).astype(np.float32)
                created = now - rng.randrange(0, 365 * DAY_MS)
                puts.append((Memory(
                    memory_id=f"m_{t:03d}_{doc:07d}", doc_id=doc, content=text,
                    type=rng.choice([MemoryType.EPISODIC, MemoryType.EPISODIC, MemoryType.SEMANTIC,
                                     MemoryType.PROCEDURAL]),
                    importance=round(rng.random(), 2), created_at_ms=created,
                    last_access_at_ms=created + rng.randrange(0, max(1, now - created)), access_count=0,
                    entities=(), source_ref="", scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE,
                    supersedes=(), superseded_by="", pinned=rng.random() < 0.01, expires_at_ms=0, metadata={},
                    source_refs=(), updated_at_ms=created), vec))
            with shard.write_lock:
                shard.apply(puts=puts)
        shard.flush()
        if tenants > 1 and (t + 1) % 10 == 0:
            log.info("built %d/%d tenants", t + 1, tenants)
    registry.close()
    catalog.close()
    (directory / "complete.json").write_text(json.dumps(
        {"tenants": tenants, "per_tenant": per_tenant, "pool": len(pool), "built_s": time.perf_counter() - started}))
    log.info("built %s in %.1fs", directory.name, time.perf_counter() - started)
    return directory
