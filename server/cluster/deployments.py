"""The Ray Serve deployments: Encoder and Reranker (stateless, batched across tenants) and TenantShard (an
engine over the tenants the consistent-hash ring routes to it, every log in object storage).

``build_application(config)`` binds the three into one application whose ingress deployment is
TenantShard; :mod:`server.cluster.ingress` calls it through ``serve.get_app_handle(cluster.app_name)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ray import serve
from ray.serve.config import RequestRouterConfig
from ray.serve.handle import DeploymentHandle

from server.cluster.board import BOARD_INTERVAL_S, dir_bytes, publish, rss_bytes
from server.cluster.direct import Crashed, Refused, Target, node_host
from server.cluster.frames import FrameServer
from server.cluster.passes import Passes, Waiting
from server.cluster.streams import StreamServer
from server.cluster.remote_models import ModelTargets, RemoteEmbedder, RemoteReranker, model_info, split
from server.config import ServerConfig
from server.domain import KeyScope
from server.errors import ConfigError, EngramError, NotOwner, NotReady, StoreUnavailable
from server.tenants.settings import RANGES, TenantSettings
from server.tracing import build_tracing, hop_span

log = logging.getLogger(__name__)

ROUTER = "ray.serve.experimental.consistent_hash_router.ConsistentHashRouter"
# One fallback replica: while the ring still names a replica that died (until the controller's next broadcast,
# ~6 s here), the tenant's calls go to the next replica clockwise, which takes the log over (with none they
# waited for the broadcast: 6-12 s per kill, tests/integration/test_cluster.py). A fallback also takes calls a
# busy owner rejects (max_ongoing_requests): the tenant then moves, safe by the fence, at the cost of a reload.
ROUTER_KWARGS = {"num_virtual_nodes": 100, "num_fallback_replicas": 1}
OWNER_SWEEP_TENANTS = 16     # loaded tenants a replica re-checks the owner of per board interval without a call
HEALTH_CHECK_PERIOD_S = 2.0    # Serve's default 10 s: how soon the controller replaces a replica it lost
SHARD_MAX_ONGOING = 512      # requests one shard replica takes at once (the engine's own batchers queue them)
MODEL_MAX_ONGOING = 512      # per Encoder / Reranker replica: every shard's concurrent forwards join one batch
# Requests per forward pass (each is one engine batch's texts or pairs). A pass takes what queued while the last
# one ran (under load, every shard's forwards since), so batches form across tenants and replicas without waiting
# for stragglers (a wait only delayed a lone forward: 2 ms each with @serve.batch's).
MAX_BATCH = 64
# Serve's per-request work engram has no use for, in every replica process: user code runs on the replica's own
# event loop (Serve's default hops each request to a second loop thread and back, two thread wake-ups per call on
# each side of a hop), and no access-log line per request (the engine logs what matters).
REPLICA_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0"}
NO_ACCESS_LOG = {"enable_access_log": False}

# The engine calls a TenantShard replica forwards; the rest (keys, tenants list, info) stay at the edge.
TENANT_CALLS = frozenset({"write", "search", "get", "delete", "list_memories", "history", "confirm", "touch",
                          "consolidate", "extract", "forget", "audit", "create_tenant", "delete_tenant",
                          "template_copies"})
DEADLINE_CALLS = frozenset({"write", "search"})
# The tenant calls the edge may send a replica directly (server/cluster/direct.py); creating and deleting a
# tenant, and a template's copies, always take the Serve path.
DIRECT_CALLS = TENANT_CALLS - {"create_tenant", "delete_tenant", "template_copies"}


class TenantMoved(NotReady):
    """The tenant's shard on this replica was discarded while the call ran (another replica took its log
    over: the ring moved). Nothing is known of a write's outcome; the retry reaches the new owner."""


@dataclass(frozen=True)
class Failure:
    """A domain error of a shard call, returned rather than raised: the edge re-raises it as it is, so its
    status code is the single node's (a raised one would reach the edge wrapped in a RayTaskError)."""

    error: EngramError


class _BatchStats:
    def __init__(self) -> None:
        self.batches = 0
        self.requests = 0
        self.largest = 0
        self.direct = 0   # of ``requests``: sent to the direct method (the rest came through Serve)

    def note(self, n: int) -> None:
        self.batches += 1
        self.requests += n
        self.largest = max(self.largest, n)

    def as_dict(self) -> dict[str, int]:
        return {"batches": self.batches, "requests": self.requests, "largest_batch": self.largest,
                "direct_requests": self.direct}


class _BatchedModel:
    """One model in a deployment replica. Its forward passes (:class:`server.cluster.passes.Passes`) take the
    requests of every caller waiting when a pass starts: direct forwards, each on its connection's thread
    (server/cluster/frames.py), and Serve calls, each on an executor thread."""

    span = ""   # the SERVER span a traced request gets per pass

    def __init__(self, config: ServerConfig, load: Callable[[ServerConfig, str], Any]) -> None:
        from server.app import resolve_device, set_process_threads

        device = resolve_device(config.models.device)
        set_process_threads(config.models.cpu_threads)
        model = load(config, device)
        if model is None:
            raise ConfigError(f"the {type(self).__name__} deployment needs its model configured")
        model.warmup()
        self.model = model
        self.batches = _BatchStats()
        self.tracing = build_tracing(config.tracing)   # a span per traced request a pass serves
        self.passes = Passes(self._pass, max_requests=MAX_BATCH)
        self.direct = FrameServer(self._direct)
        self.direct.start(node_host())

    def _forward(self, items: list[Any]) -> Any:
        raise NotImplementedError

    def _direct(self, body: bytes) -> bytes:
        """A direct forward, on its connection's thread: JSON ``[items, traces]`` in, the rows as raw float32
        out."""
        items, traces = json.loads(body)
        self.batches.direct += 1
        return np.ascontiguousarray(self.passes.run(items, traces), dtype=np.float32).tobytes()

    async def _served(self, items: list[Any], traces: list[dict[str, str]]) -> np.ndarray:
        """A forward through Serve (the fallback path): the same passes, from an executor thread."""
        return await asyncio.to_thread(self.passes.run, items, traces)

    def direct_target(self) -> dict[str, str] | None:
        return None if self.direct.target is None else self.direct.target.as_dict()

    def __del__(self) -> None:
        if getattr(self, "direct", None) is not None:
            self.direct.stop()
        if getattr(self, "tracing", None) is not None:
            self.tracing.close()   # exports what is buffered

    def info(self) -> dict[str, Any]:
        return model_info(self.model)

    def stats(self) -> dict[str, int]:
        return self.batches.as_dict()

    def _pass(self, requests: list[Waiting]) -> list[np.ndarray]:
        """One pass over every request's items; with tracing on, a SERVER span :attr:`span` per traced request it
        served, timed by the pass."""
        self.batches.note(len(requests))
        items = [item for r in requests for item in r.items]
        started_ns = time.monotonic_ns()
        out = self._forward(items)
        carriers = [c for r in requests for c in r.traces]
        if self.tracing is not None and carriers:
            self.tracing.served(self.span, carriers, start_ns=started_ns, end_ns=time.monotonic_ns(),
                                attributes={"engram.batch.size": len(items), "engram.batch.requests": len(requests)})
        return split(np.asarray(out, dtype=np.float32), [len(r.items) for r in requests])


@serve.deployment(max_ongoing_requests=MODEL_MAX_ONGOING, logging_config=NO_ACCESS_LOG)
class Encoder(_BatchedModel):
    """The embedder, batched across every tenant's and replica's requests (called with no model id)."""

    span = "engram.cluster.Encoder/embed"

    def __init__(self, config: ServerConfig) -> None:
        from server.app import load_embedder

        super().__init__(config, load_embedder)

    def _forward(self, items: list[Any]) -> Any:
        return self.model.embed(items)

    async def embed(self, items: list[str], traces: list[dict[str, str]]) -> np.ndarray:
        return await self._served(items, traces)


@serve.deployment(max_ongoing_requests=MODEL_MAX_ONGOING, logging_config=NO_ACCESS_LOG)
class Reranker(_BatchedModel):
    """The cross-encoder, batched across every tenant's and replica's pairs (called with no model id)."""

    span = "engram.cluster.Reranker/score"

    def __init__(self, config: ServerConfig) -> None:
        from server.app import load_reranker

        super().__init__(config, load_reranker)

    def _forward(self, items: list[Any]) -> Any:
        return self.model.score([tuple(p) for p in items])

    async def score(self, items: list[list[str]], traces: list[dict[str, str]]) -> np.ndarray:
        return await self._served(items, traces)


class _Opened:
    """Remembers each tenant's object log as it is opened, so the replica can check who owns it now."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.logs: dict[str, Any] = {}
        self.checked_s: dict[str, float] = {}

    def opener(self, tenant_id: str) -> Any:
        inner = self.backend.opener(tenant_id)

        def open_log(directory: Path) -> Any:
            # Index caches kept from an earlier ownership are caught up from the log, or rebuilt when another
            # owner compacted past them (server/tenants/loading.py, TenantLog.compacted_seq).
            opened = inner(directory)
            self.logs[tenant_id] = opened[0]
            self.checked_s[tenant_id] = time.monotonic()
            return opened

        return open_log

    def due(self, tenant_id: str, *, every_s: float) -> bool:
        """Whether :meth:`deposed` has anything to look at now (the log fenced, or its owner record due for a
        read); never blocks, so the calls in between skip the executor."""
        opened = self.logs.get(tenant_id)
        if opened is None:
            return False
        return bool(opened.objects.fenced) or time.monotonic() - self.checked_s.get(tenant_id, 0.0) >= every_s

    def deposed(self, tenant_id: str, *, every_s: float) -> bool:
        """Whether another owner took the tenant's log since this replica loaded it: fenced on a write, or
        (at most every ``every_s``) an owner record of another epoch. Blocking (one GET)."""
        opened = self.logs.get(tenant_id)
        if opened is None:
            return False
        objects = opened.objects
        if objects.fenced:
            return True
        now = time.monotonic()
        if now - self.checked_s.get(tenant_id, 0.0) < every_s:
            return False
        self.checked_s[tenant_id] = now
        blob = objects.store.get(objects.root + "owner")
        return blob is None or int(json.loads(blob.body)["epoch"]) != objects.epoch


@serve.deployment(max_ongoing_requests=SHARD_MAX_ONGOING, health_check_period_s=HEALTH_CHECK_PERIOD_S,
                  logging_config=NO_ACCESS_LOG,
                  request_router_config=RequestRouterConfig(request_router_class=ROUTER,
                                                            request_router_kwargs=ROUTER_KWARGS))
class TenantShard:
    """The engine of the tenants routed here. Its data dir is a per-replica cache under
    ``data_dir/replicas/<replica id>``; the truth is the bucket."""

    async def __init__(self, config: ServerConfig, encoder: DeploymentHandle | None = None,
                       reranker: DeploymentHandle | None = None) -> None:
        from server import lexical
        from server.app import build_engine, engine_metrics, flush_every, resolve_device, set_process_threads
        from server.store.object_wal import ObjectLogBackend
        from server.tenants.catalog import Catalog

        if not config.object_store.bucket:
            raise ConfigError("engram on Ray needs object_store.bucket: a replica's disk is only a cache")
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.config = config
        backend = ObjectLogBackend.from_config(config.object_store, env=os.environ,
                                               owner_id=f"{os.uname().nodename}-{os.getpid()}-{self.replica}")
        await asyncio.to_thread(backend.verify)   # refuses to run on a store that ignores preconditions
        self.backend = backend
        self.opened = _Opened(backend)
        set_process_threads(config.models.cpu_threads)
        lexical.start(heap_mb=config.jvm_heap_mb)
        embedder, remote_reranker = await _models(config, encoder, reranker)
        data_dir = config.data_dir / "replicas" / self.replica
        data_dir.mkdir(parents=True, exist_ok=True)
        own = dataclasses.replace(config, data_dir=data_dir)
        self.catalog = Catalog(data_dir / "system")   # a cache of the edge's: tenants appear here on first use
        self.engine, self.pools = build_engine(own, catalog=self.catalog, embedder=embedder, reranker=remote_reranker,
                                               device=resolve_device(config.models.device), open_log=self.opened.opener)
        await self.engine.start()
        self._create_lock = threading.Lock()
        self._moves: dict[str, int] = {}   # per tenant: how often this replica discarded its shard
        self._discarding: dict[str, int] = {}   # per tenant: discards under way (counted in _moves already)
        self._flusher = asyncio.get_running_loop().create_task(
            flush_every(config.lucene_commit_interval_s, self.engine))
        self.data_dir = data_dir
        self.metrics = engine_metrics(self.engine)
        self.direct = StreamServer(self._direct)   # the edge's direct calls (server/cluster/direct.py)
        await self.direct.start(node_host())
        self._publisher = asyncio.get_running_loop().create_task(self._publish_every(BOARD_INTERVAL_S))
        log.info("TenantShard replica %s up (pid %d)", self.replica, os.getpid())

    def _ensure_tenant(self, tenant_id: str, settings: dict[str, float]) -> None:
        """The edge checked that the tenant exists; this replica's catalog learns it on first use (the
        tenant's data comes from the bucket when its shard loads), and its settings as the edge holds them."""
        with self._create_lock:
            if not self.catalog.has_tenant(tenant_id):
                self.engine.registry.create(tenant_id)
            if self.catalog.settings(tenant_id) != TenantSettings.from_stored(settings):
                self.catalog.update_settings(tenant_id, settings, sorted(set(RANGES) - set(settings)))

    def _known(self, tenant_id: str, settings: dict[str, float]) -> bool:
        """Whether :meth:`_ensure_tenant` would change nothing (two dict reads, no lock: a stale answer only sends
        the call through it)."""
        return self.catalog.has_tenant(tenant_id) and self.catalog.settings(tenant_id) == TenantSettings.from_stored(
            settings)

    def _check_owner(self, tenant_id: str) -> None:
        if self.opened.deposed(tenant_id, every_s=self.config.cluster.verify_owner_s):
            self._discard(tenant_id)

    def _discard(self, tenant_id: str) -> None:
        """Drops this replica's copy of a tenant another replica took over (the next call reloads it). A call
        still running on the copy then fails on its closed parts: it answers TenantMoved (UNAVAILABLE)."""
        with self._create_lock:
            self._moves[tenant_id] = self._moves.get(tenant_id, 0) + 1
            self._discarding[tenant_id] = self._discarding.get(tenant_id, 0) + 1
        try:
            self.engine.registry.discard(tenant_id)
        finally:
            with self._create_lock:
                self._discarding[tenant_id] -= 1

    def _moves_seen(self, tenant_id: str) -> int:
        """The discards a call starting now has seen complete: a discard under way (counted, its shard still
        loaded) is not, so a call that takes the shard before the discard closes it and then fails on its closed
        parts reads as moved (TenantMoved), not as a bug."""
        with self._create_lock:
            return self._moves.get(tenant_id, 0) - (1 if self._discarding.get(tenant_id, 0) else 0)

    async def call(self, method: str, principal: KeyScope, tenant_id: str, args: Sequence[Any],
                   kwargs: dict[str, Any], remaining_s: float | None, request_id: str,
                   settings: dict[str, float], trace: dict[str, str] | None = None) -> Any:
        """One engine call for one tenant, as the edge authorized it (``settings``: the tenant's own, from the
        edge's catalog, which holds them; a replica that just got the tenant has none). Domain errors come back as
        :class:`Failure`; a shard whose log another replica took is discarded here, so the retry loads it
        afresh. ``trace``: the edge's trace context; with tracing on, the call is a SERVER span under it."""
        with hop_span(self.engine.tracing, f"engram.cluster.TenantShard/{method}", trace):
            return await self._call(method, principal, tenant_id, args, kwargs, remaining_s, request_id, settings)

    async def _call(self, method: str, principal: KeyScope, tenant_id: str, args: Sequence[Any],
                    kwargs: dict[str, Any], remaining_s: float | None, request_id: str,
                    settings: dict[str, float]) -> Any:
        from server.grpc.interceptors import REQUEST_ID

        if method not in TENANT_CALLS:
            raise ValueError(f"not a tenant call: {method}")
        token = REQUEST_ID.set(request_id)
        loop = asyncio.get_running_loop()
        moves = self._moves_seen(tenant_id)
        try:
            if method != "create_tenant":   # each executor hop only when there is work for it (a thread wake-up each)
                if not self._known(tenant_id, settings):
                    await loop.run_in_executor(self.engine.write_pool, self._ensure_tenant, tenant_id, settings)
                if self.opened.due(tenant_id, every_s=self.config.cluster.verify_owner_s):
                    await loop.run_in_executor(self.engine.cpu_pool, self._check_owner, tenant_id)
            if method in DEADLINE_CALLS and remaining_s is not None:
                kwargs = {**kwargs, "deadline_ns": time.monotonic_ns() + int(remaining_s * 1e9)}
            call = self._template_copies if method == "template_copies" else getattr(self.engine, method)
            result = await call(principal, tenant_id, *args, **kwargs)
            if method == "delete_tenant":   # every object of its log leaves the bucket too
                await loop.run_in_executor(self.engine.write_pool, self.backend.drop_tenant, tenant_id)
            return result
        except EngramError as exc:
            if isinstance(exc, NotOwner) or (isinstance(exc, StoreUnavailable) and exc.outcome_unknown):
                # Another owner fenced the log, or a commit's outcome is unknown: only a reload settles it.
                await loop.run_in_executor(self.engine.write_pool, self._discard, tenant_id)
            return Failure(exc)
        except Exception as exc:
            if self._moves.get(tenant_id, 0) == moves:
                raise   # a bug, not a handoff: INTERNAL, as on a single node
            log.info("tenant %s: %s ran into the discard of its shard (%s: %s)", tenant_id, method,
                     type(exc).__name__, exc)
            return Failure(TenantMoved(f"tenant {tenant_id!r} moved to another replica during the call; retry "
                                       "(a write may or may not have been applied)"))
        finally:
            REQUEST_ID.reset(token)

    async def _direct(self, body: bytes) -> bytes:
        """A call the edge sent directly (server/cluster/direct.py): the Serve call's arguments, pickled. Run as
        :meth:`call` runs it when the tenant is loaded here and its log still this replica's (the owner check
        :meth:`_call` makes, made first); otherwise :class:`Refused`, nothing done, and the edge takes the Serve
        path (which loads the tenant, or reaches the replica that now holds it)."""
        method, principal, tenant_id, args, kwargs, remaining_s, request_id, settings, trace = pickle.loads(body)
        if method not in DIRECT_CALLS or not self.engine.registry.holds(tenant_id):
            return pickle.dumps(Refused("not loaded here"))
        if self.opened.due(tenant_id, every_s=self.config.cluster.verify_owner_s):
            await asyncio.get_running_loop().run_in_executor(self.engine.cpu_pool, self._check_owner, tenant_id)
            if not self.engine.registry.holds(tenant_id):
                return pickle.dumps(Refused("taken over by another replica"))
        try:
            out = await self.call(method, principal, tenant_id, args, kwargs, remaining_s, request_id, settings, trace)
        except Exception:
            log.exception("tenant %s: direct %s failed (request %s)", tenant_id, method, request_id)
            out = Crashed()
        return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)

    async def _template_copies(self, principal: KeyScope, tenant_id: str) -> list[Any]:
        """A template tenant's cold-start copies, read on its own replica (CreateTenant with a template: the
        edge writes them to the new tenant's replica)."""
        from server.engine.admin import template_copies

        shard = await self.engine._shard(principal, tenant_id)
        return template_copies(shard, now_ms=self.engine.admin.clock())

    def info(self) -> dict[str, Any]:
        return self.engine.info()

    def _record(self) -> dict[str, Any]:
        """What this replica publishes for the edge's /metrics and Stats (server/cluster/board.py)."""
        import ray
        from prometheus_client import generate_latest

        return {"replica": self.replica, "pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(),
                "stats": self.engine.registry.stats(), "rss_bytes": rss_bytes(), "disk_bytes": dir_bytes(self.data_dir),
                "direct": self.direct.target.as_dict() if self.direct.target is not None else None,
                "metrics": generate_latest(self.metrics.registry).decode()}

    def _sweep_owners(self) -> None:
        """Drops the copies of tenants another replica took over though no call came here since (a call checks its
        tenant's owner itself): each board interval, the loaded tenants whose check is due, the longest unchecked
        first, at most :data:`OWNER_SWEEP_TENANTS` (one GET each; a fenced log needs none). Without it such a copy
        stayed loaded, and listed in Stats, until its next call."""
        every_s = self.config.cluster.verify_owner_s
        due = [s.tenant_id for s in self.engine.registry.loaded() if self.opened.due(s.tenant_id, every_s=every_s)]
        due.sort(key=lambda t: self.opened.checked_s.get(t, 0.0))
        for tenant_id in due[:OWNER_SWEEP_TENANTS]:
            try:
                self._check_owner(tenant_id)
            except Exception as exc:  # noqa: BLE001 - the store unreachable: the next sweep or call checks again
                log.info("tenant %s: owner check failed (%s)", tenant_id, exc)

    async def _publish_every(self, interval_s: float) -> None:
        while True:
            try:
                await asyncio.to_thread(self._sweep_owners)
                record = await asyncio.to_thread(self._record)
                await asyncio.to_thread(publish, self.backend.store, record)
            except Exception as exc:  # noqa: BLE001 - figures for operators: the next interval tries again
                log.warning("replica %s: could not publish its figures (%s)", self.replica, exc)
            await asyncio.sleep(interval_s)

    def where(self) -> dict[str, Any]:
        """This replica: its id, process, node and loaded tenants (the failure tests kill by pid)."""
        import ray

        return {"replica": self.replica, "pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(),
                "tenants": [s.tenant_id for s in self.engine.registry.loaded()]}

    def stats(self) -> dict[str, Any]:
        return self.engine.registry.stats()

    async def __del__(self) -> None:
        if not hasattr(self, "_flusher"):
            return   # the constructor failed before the engine started
        # Serve drained its own calls; direct calls still running finish (new ones are refused: the ring moved on).
        if hasattr(self, "direct"):
            await self.direct.stop(self.config.grace_s)
        for task in (self._flusher, self._publisher):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.engine.close()
        await asyncio.get_running_loop().run_in_executor(self.engine.write_pool, self.engine.registry.close)
        self.catalog.close()
        for pool in self.pools:
            pool.shutdown(wait=True)


async def _models(config: ServerConfig, encoder: DeploymentHandle | None,
                  reranker: DeploymentHandle | None) -> tuple[Any, Any]:
    """The replica's embedder and reranker: the deployments' stand-ins, or (``cluster.encoder_replicas`` 0, no
    Encoder deployment) the models themselves, loaded in this process as a single node loads them."""
    if encoder is not None:
        n = 2 * config.cluster.encoder_replicas   # asks enough times to meet each model replica (pow-2 routed)
        embedder = RemoteEmbedder(encoder, await encoder.info.remote(), await _model_targets(encoder, n))
        if reranker is None:
            return embedder, None
        return embedder, RemoteReranker(reranker, await reranker.info.remote(), await _model_targets(reranker, n))
    from server.app import load_embedder, load_reranker, resolve_device

    device = resolve_device(config.models.device)
    local = await asyncio.to_thread(lambda: (load_embedder(config, device), load_reranker(config, device)))
    for model in local:
        if model is not None:
            await asyncio.to_thread(model.warmup)
    return local


async def _model_targets(handle: DeploymentHandle, n: int) -> ModelTargets:
    """A model deployment's replicas' direct targets (asked ``n`` times: each answer is one replica's), and how
    to ask again from an executor thread."""
    def discover() -> list[Target]:
        asked = [handle.direct_target.remote() for _ in range(n)]
        return [t for r in asked if (t := Target.from_dict(r.result(timeout_s=10))) is not None]

    found = await asyncio.gather(*(handle.direct_target.remote() for _ in range(n)))
    return ModelTargets(discover, found=[t for d in found if (t := Target.from_dict(d)) is not None])


def build_application(config: ServerConfig) -> Any:
    """The bound Serve application: TenantShard (ingress, consistent-hash routed) over Encoder and, when a
    reranker is configured, Reranker; with ``cluster.encoder_replicas`` 0, TenantShard alone, its models inside."""
    c = config.cluster
    models = {"num_replicas": c.encoder_replicas, "ray_actor_options": actor_options(c.encoder_cpus)}
    encoder = Encoder.options(**models).bind(config) if c.encoder_replicas else None   # 0: in each shard replica
    reranker = Reranker.options(**models).bind(config) if config.models.reranker and encoder is not None else None
    return TenantShard.options(num_replicas=c.replicas, ray_actor_options=actor_options(c.shard_cpus)).bind(
        config, encoder, reranker)


def actor_options(cpus: float) -> dict[str, Any]:
    """A replica's Ray actor options: its CPUs, and :data:`REPLICA_ENV` (Serve reads it when it is imported, so
    it is set in the replica process's environment; an application's own runtime_env merges with it)."""
    return {"num_cpus": cpus, "runtime_env": {"env_vars": dict(REPLICA_ENV)}}


def app_builder(args: dict[str, str]) -> Any:
    """The application for a Serve config file (``import_path: server.cluster.deployments:app_builder``,
    ``args: {config: /path/engram.toml}``), e.g. a KubeRay RayService's ``serveConfigV2``."""
    from server.config import load_config

    return build_application(load_config(toml_path=Path(args["config"]) if args.get("config") else None))
