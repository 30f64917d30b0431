"""Builds (once) and caches the index benchmark's tenant directories under ``benchmarks/.cache/index``.

Texts and vectors come from the serving benchmark's loader (``benchmarks/serving``): memories are made of
sentences from a fixed pool, each pool sentence embedded once with the packaged MiniLM, and a memory's
vector is the L2-normalised mean of its sentences' vectors — 384-d, clustered the way real embeddings
cluster, and consistent with the text BM25 sees. Memories are written through the store API only
(``TenantStore.commit``: WAL with vectors, fsync per group); the real server builds FAISS and Lucene
from that log when it first loads the tenant, exactly as after a crash or an eviction.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from pathlib import Path

import numpy as np

from benchmarks.serving.build import pool_vectors
from benchmarks.serving.corpus import memories, query_texts
from server.domain import Memory, MemoryStatus, MemoryType
from server.store.memory_store import TenantStore
from server.tenants.catalog import Catalog
from server.tenants.registry import TenantRegistry

log = logging.getLogger(__name__)

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "index"
ADMIN_KEY = "bench-admin-key-0123456789abcdef"
DAY_MS = 86_400_000
GROUP = 10_000


def memory_vectors(n: int, *, seed: int, pool_vecs: np.ndarray, pool: list[str]) -> tuple[list[str], np.ndarray]:
    """``n`` memory texts and their vectors (normalised means of pool-sentence embeddings)."""
    items = memories(n, pool, seed=seed)
    texts = [text for text, _ in items]
    vectors = np.empty((n, pool_vecs.shape[1]), dtype=np.float32)
    for i, (_, parts) in enumerate(items):
        vectors[i] = pool_vecs[parts].mean(axis=0)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return texts, vectors


def _memory(doc: int, text: str, rng: random.Random, now: int) -> Memory:
    created = now - rng.randrange(0, 365 * DAY_MS)
    return Memory(
        memory_id=f"m_{doc:09d}", doc_id=doc, content=text,
        type=(MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL)[rng.randrange(3)],
        importance=round(rng.random(), 2), created_at_ms=created,
        last_access_at_ms=created + rng.randrange(0, max(1, now - created)), access_count=0, entities=(),
        source_ref="", scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(),
        superseded_by="", pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=created)


def write_tenant(directory: Path, texts: list[str], vectors: np.ndarray, *, seed: int) -> None:
    """Writes memories into a tenant directory through the store API, in fsynced groups."""
    store, _ = TenantStore.open(directory, dim=vectors.shape[1])
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    try:
        for start in range(0, len(texts), GROUP):
            docs = store.allocate_doc_ids(min(GROUP, len(texts) - start))
            store.commit(puts=[(_memory(doc, texts[start + i], rng, now), vectors[start + i])
                               for i, doc in enumerate(docs)])
    finally:
        store.close()


def dataset(embedder, *, tenants: int, per_tenant: int) -> Path:  # type: ignore[no-untyped-def]
    """A data directory with ``tenants`` × ``per_tenant`` memories, built unless cached."""
    directory = CACHE / f"data-t{tenants}-m{per_tenant}"
    if (directory / "complete.json").is_file():
        return directory
    if directory.exists():
        shutil.rmtree(directory)
    pool, pool_vecs = pool_vectors(embedder)
    started = time.perf_counter()
    catalog = Catalog(directory / "system")
    catalog.ensure_admin_key(ADMIN_KEY)
    registry = TenantRegistry(data_dir=directory, catalog=catalog, dim=pool_vecs.shape[1])
    for t in range(tenants):
        name = tenant_name(t)
        registry.create(name)
        texts, vectors = memory_vectors(per_tenant, seed=1000 + t, pool_vecs=pool_vecs, pool=pool)
        write_tenant(registry.directory(name), texts, vectors, seed=t)
        if tenants == 1:
            np.save(directory / "vectors.npy", vectors)   # doc ids are 1..n: the exact-search ground truth
        if tenants > 1 and (t + 1) % 100 == 0:
            log.info("wrote %d/%d tenants", t + 1, tenants)
    registry.close()
    catalog.close()
    (directory / "complete.json").write_text(json.dumps(
        {"tenants": tenants, "per_tenant": per_tenant, "written_s": time.perf_counter() - started}))
    log.info("wrote %s in %.1fs", directory.name, time.perf_counter() - started)
    return directory


def tenant_name(i: int) -> str:
    return f"ix-{i:04d}"


def truth_vectors(directory: Path) -> tuple[np.ndarray, np.ndarray]:
    """(doc ids, vectors) of a single-tenant dataset: the ground truth for exact search."""
    vectors = np.load(directory / "vectors.npy")
    return np.arange(1, len(vectors) + 1, dtype=np.int64), vectors


def queries(embedder, n: int, *, seed: int = 7) -> tuple[list[str], np.ndarray]:  # type: ignore[no-untyped-def]
    texts = list(dict.fromkeys(query_texts(n * 3, seed=seed)))[:n]
    return texts, np.asarray(embedder.embed(texts), dtype=np.float32)
