"""The edge of ``engram serve --ray``: engram's own grpc.aio server (the same servicers, interceptors, health
and reflection as a single node) over :class:`ClusterEngine`, which authorizes each call here and forwards
each tenant's call to the TenantShard replica the consistent-hash ring gives the tenant
(``handle.options(session_id=tenant)``).

The edge keeps the key catalog (keys, the tenant list) in its own data dir, as a single node does: auth
never leaves this process. One edge process per cluster (a second would hold a second catalog).

A tenant's call goes straight to its replica's direct method when the replica published one and the channel is
up (server/cluster/direct.py), the Serve handle call otherwise and whenever the replica refuses it.

A call in flight on a replica that dies (ActorDiedError, RayActorError, a replica Serve already marked
unavailable, ...) answers UNAVAILABLE, never INTERNAL: the write may or may not have landed (its shard
replays what was acknowledged to the store), and a retry reaches the tenant's next owner.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import os
import pickle
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import ray
from ray import serve
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, TaskCancelledError
from ray.serve.exceptions import (
    BackPressureError,
    DeploymentUnavailableError,
    ReplicaUnavailableError,
    RequestCancelledError,
)
from ray.serve.handle import DeploymentHandle

from server.app import open_bucket, serve_until_signal
from server.cluster.board import BOARD_INTERVAL_S, Board, HopCollector, ReplicaCollector, merge_stats
from server.cluster.deployments import DIRECT_CALLS, Failure, TenantShard, build_application
from server.cluster.direct import Crashed, HopFailed, Refused, ring_owner
from server.cluster.streams import ShardLinks, StreamClient
from server.config import ServerConfig
from server.console.frontend import ConsoleFrontend
from server.domain import AuditOp, Filter, ForgetSpec, KeyScope, MemoryInput, SearchQuery
from server.engine.engine import Engine
from server.errors import ConfigError, DeadlineExceeded, NotFound, NotReady
from server.grpc.interceptors import REQUEST_ID
from server.grpc.server import GrpcFrontend
from server.metrics import Metrics
from server.tenants.catalog import Catalog, validate_tenant_id
from server.tenants.settings import TenantSettings, checked_update
from server.tracing import build_tracing, hop_carrier

log = logging.getLogger(__name__)

# What a replica that went away looks like to its caller. Each means the call may not have run, or ran only
# in part: UNAVAILABLE (retry), as any other lost replica of a distributed store answers.
REPLICA_GONE: tuple[type[BaseException], ...] = (
    ActorDiedError, RayActorError, ActorUnavailableError, ReplicaUnavailableError, DeploymentUnavailableError,
    BackPressureError, RequestCancelledError, TaskCancelledError)
# The calls that change nothing: a direct one lost in flight is sent again through Serve. Any other answers
# UNAVAILABLE, as a Serve call lost with its replica does (it may have been applied), unless it never left.
READ_CALLS = frozenset({"search", "get", "list_memories", "history", "audit"})
_SERVE = object()   # a direct call's answer: take the Serve path


class ReplicaUnavailable(NotReady):
    """The shard replica serving the tenant went away mid-call (or none is up yet): retry."""


class ClusterEngine:
    """What the gRPC servicers call, with the engine's signatures; tenant calls go to the shard replicas."""

    def __init__(self, *, config: ServerConfig, shards: DeploymentHandle, catalog: Catalog,
                 info: dict[str, Any]) -> None:
        self.config = config
        self.tracing = build_tracing(config.tracing)   # the edge's SERVER spans; replicas continue the trace
        self.shards = shards
        self.catalog = catalog
        self.registry = SimpleNamespace(catalog=catalog)   # the edge interceptor authenticates against it
        self.space = None   # the replicas' disks are caches; the bucket has no free-space watermark here
        self._info = info
        self.forwarded = 0
        self.direct_calls = 0      # of ``forwarded``: answered by the replica's direct method
        self.direct_refused = 0    # direct calls a replica refused (the tenant not loaded there): through Serve
        # (method, outcome) → calls, for /metrics (HopCollector): outcome "answered" | "refused" | "failed" of a
        # direct call, "serve" of a call that went through Serve (no direct route, refused, or a read lost)
        self.hop_counts: Counter[tuple[str, str]] = Counter()
        self.replica_failures = 0
        self.channels = ShardLinks()
        self.board_records: list[dict[str, Any]] = []   # the replicas' figures (ClusterApp refreshes them)

    # -- routing: the single node's authorization, here at the edge -------------------------------------
    authorize = Engine.authorize
    require_admin = Engine.require_admin

    def _exists(self, tenant_id: str) -> None:
        if not self.catalog.has_tenant(tenant_id):
            raise NotFound(f"tenant {tenant_id!r} does not exist")

    async def _forward(self, method: str, principal: KeyScope, tenant_id: str, *args: Any,
                       deadline_ns: int | None = None, **kwargs: Any) -> Any:
        remaining_s = None if deadline_ns is None else max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9)
        settings = {k: v for k, v in dataclasses.asdict(self.catalog.settings(tenant_id)).items() if v is not None}
        request = (method, principal, tenant_id, args, kwargs, remaining_s, REQUEST_ID.get(), settings,
                   hop_carrier(self.tracing))
        self.forwarded += 1
        if method in DIRECT_CALLS:
            client = self.channels.route(ring_owner(self.shards, tenant_id))
            if client is not None:
                out = await self._direct(client, request)
                if out is not _SERVE:
                    return out
        self.hop_counts[(method, "serve")] += 1
        response = self.shards.options(session_id=tenant_id).call.remote(*request)
        try:
            out = await (asyncio.wait_for(_awaited(response), remaining_s) if remaining_s is not None else response)
        except TimeoutError:
            response.cancel()
            raise DeadlineExceeded("the deadline passed while the tenant's shard replica worked") from None
        except REPLICA_GONE as exc:
            self.replica_failures += 1
            log.warning("tenant %s: %s failed on a shard replica that went away (%s)", tenant_id, method,
                        type(exc).__name__)
            raise ReplicaUnavailable(f"the shard replica serving tenant {tenant_id!r} went away during the call; "
                                     "retry (a write may or may not have been applied)") from exc
        if isinstance(out, Failure):
            raise out.error
        return out

    async def _direct(self, client: StreamClient, request: tuple[Any, ...]) -> Any:
        """The call sent to the replica's direct method; ``_SERVE`` when it should take the Serve path instead
        (refused, or a read lost in flight)."""
        method, tenant_id, remaining_s = request[0], request[2], request[5]
        try:
            reply = await client.call(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL), timeout=remaining_s)
        except HopFailed as exc:
            self.hop_counts[(method, "failed")] += 1
            if exc.deadline:
                raise DeadlineExceeded("the deadline passed while the tenant's shard replica worked") from None
            # Until the replica's next record; its calls still in flight are answered (closed as each ends).
            self.channels.drop(client.target.address)
            log.warning("tenant %s: direct %s to %s failed (%s)", tenant_id, method, client.target.address, exc.code)
            if method in READ_CALLS or not exc.sent:   # a read, or a call that never left: nothing ran
                return _SERVE
            self.replica_failures += 1
            raise ReplicaUnavailable(f"the shard replica serving tenant {tenant_id!r} went away during the call; "
                                     "retry (a write may or may not have been applied)") from exc
        out = pickle.loads(reply)
        if isinstance(out, Refused):
            self.direct_refused += 1
            self.hop_counts[(method, "refused")] += 1
            return _SERVE
        self.direct_calls += 1
        self.hop_counts[(method, "answered")] += 1
        if isinstance(out, Crashed):
            raise RuntimeError(f"the shard replica failed {method} for tenant {tenant_id!r} (its log has why)")
        if isinstance(out, Failure):
            raise out.error
        return out

    async def _tenant(self, method: str, principal: KeyScope, tenant_id: str, *args: Any, **kwargs: Any) -> Any:
        self.authorize(principal, tenant_id)
        self._exists(tenant_id)
        return await self._forward(method, principal, tenant_id, *args, **kwargs)

    # -- the tenant calls (server/engine/engine.py's, forwarded) ---------------------------------------------
    # ``options``: what the engine's call takes beside (an idempotency key), passed through as it is.
    async def write(self, principal: KeyScope, tenant_id: str, memories: Sequence[MemoryInput], *,
                    deadline_ns: int | None = None, **options: Any) -> Any:
        return await self._tenant("write", principal, tenant_id, list(memories), deadline_ns=deadline_ns, **options)

    async def search(self, principal: KeyScope, tenant_id: str, queries: Sequence[SearchQuery], *,
                     deadline_ns: int | None = None) -> Any:
        return await self._tenant("search", principal, tenant_id, list(queries), deadline_ns=deadline_ns)

    async def get(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str]) -> Any:
        return await self._tenant("get", principal, tenant_id, list(memory_ids))

    async def delete(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str], **options: Any) -> Any:
        return await self._tenant("delete", principal, tenant_id, list(memory_ids), **options)

    async def list_memories(self, principal: KeyScope, tenant_id: str, *, flt: Filter, page_size: int,
                            page_token: str) -> Any:
        return await self._tenant("list_memories", principal, tenant_id, flt=flt, page_size=page_size,
                                  page_token=page_token)

    async def history(self, principal: KeyScope, tenant_id: str, memory_id: str) -> Any:
        return await self._tenant("history", principal, tenant_id, memory_id)

    async def confirm(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str], **options: Any) -> Any:
        return await self._tenant("confirm", principal, tenant_id, list(memory_ids), **options)

    async def touch(self, principal: KeyScope, tenant_id: str, memory_ids: Sequence[str]) -> Any:
        return await self._tenant("touch", principal, tenant_id, list(memory_ids))

    async def consolidate(self, principal: KeyScope, tenant_id: str, *, dry_run: bool = False) -> Any:
        return await self._tenant("consolidate", principal, tenant_id, dry_run=dry_run)

    async def extract(self, principal: KeyScope, tenant_id: str, *, conversation: str, turns: int = 0) -> Any:
        return await self._tenant("extract", principal, tenant_id, conversation=conversation, turns=turns)

    async def forget(self, principal: KeyScope, tenant_id: str, spec: ForgetSpec, **options: Any) -> Any:
        return await self._tenant("forget", principal, tenant_id, spec, **options)

    async def audit(self, principal: KeyScope, tenant_id: str, *, page_size: int, page_token: str,
                    ops: frozenset[AuditOp], memory_id: str) -> Any:
        return await self._tenant("audit", principal, tenant_id, page_size=page_size, page_token=page_token,
                                  ops=ops, memory_id=memory_id)

    # -- per-tenant settings: the edge's catalog holds them; every forwarded call carries them ------------
    async def settings(self, principal: KeyScope, tenant_id: str) -> tuple[TenantSettings, TenantSettings]:
        self.authorize(principal, tenant_id)
        self._exists(tenant_id)
        own = self.catalog.settings(tenant_id)
        return own, own.effective(self.config.memory)

    async def update_settings(self, principal: KeyScope, tenant_id: str, *, values: dict[str, float],
                              reset: Sequence[str]) -> tuple[TenantSettings, TenantSettings]:
        self.authorize(principal, tenant_id)
        checked, names = checked_update(values, reset)
        own = await asyncio.get_running_loop().run_in_executor(None, self.catalog.update_settings, tenant_id,
                                                               checked, names)
        return own, own.effective(self.config.memory)

    # -- tenants and keys (the edge's catalog) ---------------------------------------------------------------
    async def create_tenant(self, principal: KeyScope, tenant_id: str, initial: Sequence[MemoryInput] = (),
                            template_tenant_id: str = "") -> int:
        self.require_admin(principal)
        validate_tenant_id(tenant_id)
        # A template lives on its own replica: its copies are read there, then written to the new tenant's
        # replica in chunks, before ``initial``, as a single node does (server/engine/admin.py).
        copied = await self._tenant("template_copies", principal, template_tenant_id) if template_tenant_id else []
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.catalog.create_tenant, tenant_id)   # ALREADY_EXISTS here
        try:
            count = int(await self._forward("create_tenant", principal, tenant_id, []))
            step = self.config.limits.max_memories_per_write
            for start in range(0, len(copied), step):   # copies carry their importance: min_salience keeps them
                await self._forward("write", principal, tenant_id, copied[start:start + step])
            if initial:
                results = await self._forward("write", principal, tenant_id, list(initial))
                count += sum(1 for r in results if r.memory_id)
            return count + len(copied)
        except BaseException:
            await loop.run_in_executor(None, self.catalog.drop_tenant, tenant_id)
            raise

    async def delete_tenant(self, principal: KeyScope, tenant_id: str) -> int:
        self.require_admin(principal)
        validate_tenant_id(tenant_id)
        self._exists(tenant_id)
        await asyncio.get_running_loop().run_in_executor(None, self.catalog.drop_tenant, tenant_id)
        return int(await self._forward("delete_tenant", principal, tenant_id))

    def list_tenants(self, principal: KeyScope) -> list[str]:
        return [t for t in self.catalog.tenants() if principal.covers(t)]

    def _keys(self, principal: KeyScope, op: str, *args: Any, **kwargs: Any) -> Any:
        """Key management (admin only) on the edge's catalog, where authentication reads keys."""
        self.require_admin(principal)
        return getattr(self.catalog, op)(*args, **kwargs)

    def create_key(self, principal: KeyScope, **spec: Any) -> tuple[str, str]:   # name, tenant_ids, prefixes, admin
        return self._keys(principal, "create_key", **spec)  # type: ignore[no-any-return]

    def revoke_key(self, principal: KeyScope, key_id: str) -> None:
        self._keys(principal, "revoke_key", key_id)

    def rotate_key(self, principal: KeyScope, key_id: str) -> str:
        return self._keys(principal, "rotate_key", key_id)  # type: ignore[no-any-return]

    def info(self) -> dict[str, Any]:
        return self._info

    def stats(self, principal: KeyScope, tenant_id: str = "") -> dict[str, Any]:
        """Every replica's registry stats as one (server/cluster/board.py: as the replicas last published them,
        at most ``BOARD_INTERVAL_S`` old): totals summed, each loaded tenant once per replica holding it."""
        self.require_admin(principal)
        if tenant_id:
            validate_tenant_id(tenant_id)
            self._exists(tenant_id)
        return merge_stats(self.board_records, total_tenants=len(self.catalog.tenants()), tenant_id=tenant_id)


async def _awaited(response: Any) -> Any:
    return await response


def edge_handle(app_name: str) -> DeploymentHandle:
    """The edge's own handle on the TenantShard deployment, its router on the edge's event loop: a call is then
    routed and sent from the loop that awaits it (Serve's default runs a handle's router on a loop thread of its
    own: two thread hand-offs per call). Its own object, not ``serve.get_app_handle``'s cached one, which callers
    on other threads may share. Only the edge's event loop may call it."""
    handle: DeploymentHandle = DeploymentHandle(TenantShard.name, app_name)
    handle._init(_run_router_in_separate_loop=False)
    return handle


def connect(config: ServerConfig) -> None:
    """Joins ``cluster.address`` (or starts a local Ray) and (re)deploys the application."""
    if not config.object_store.bucket:
        raise ConfigError("engram serve --ray needs object_store.bucket: a replica's disk is only a cache")
    if not ray.is_initialized():
        _init_ray(config)
    serve.run(build_application(config), name=config.cluster.app_name, route_prefix=None)


def logical_cpus(config: ServerConfig) -> float:
    """The Ray CPUs the application reserves: every replica's ``*_cpus``, plus one for Serve's controller."""
    c = config.cluster
    models = 2 if config.models.reranker else 1
    return c.replicas * c.shard_cpus + models * c.encoder_replicas * c.encoder_cpus + 1.0


def _init_ray(config: ServerConfig) -> None:
    """Joins ``cluster.address``, or starts a local Ray with at least the logical CPUs the application reserves
    (Ray's default, the core count, left a replica unschedulable on 2 cores: ``serve.run`` then waits forever)."""
    if config.cluster.address:
        ray.init(address=config.cluster.address, log_to_driver=False)
        return
    cpus = max(float(os.cpu_count() or 1), logical_cpus(config))
    ray.init(num_cpus=math.ceil(cpus), log_to_driver=False)
    log.info("started a local Ray with %d logical CPUs", math.ceil(cpus))


@dataclass
class ClusterApp:
    """The edge process: its catalog, the gRPC frontend over ClusterEngine, the Serve application."""

    config: ServerConfig
    engine: ClusterEngine
    frontend: GrpcFrontend
    new_admin_key: str | None
    board: Board
    metrics: Metrics | None = None
    metrics_port: int = 0
    console: ConsoleFrontend | None = None   # the console over ClusterEngine (console_listen)
    console_port: int = 0
    _stopped: bool = field(default=False)
    _refresher: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.frontend.port

    async def start(self) -> None:
        await self.refresh_board()
        self._refresher = asyncio.get_running_loop().create_task(self._refresh_every(BOARD_INTERVAL_S))
        if self.metrics is not None and self.config.metrics_listen:
            self.metrics_port = self.metrics.serve(self.config.metrics_listen)
        if self.console is not None:
            self.console_port = await self.console.start()
        await self.frontend.start()
        await self.frontend.set_serving(True)
        log.info("engram (Ray Serve application %r) serving on port %d", self.config.cluster.app_name, self.port)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._refresher is not None:
            self._refresher.cancel()
        await self.frontend.stop(self.config.grace_s)
        if self.console is not None:
            await self.console.stop()
        if self.metrics is not None:
            self.metrics.close()
        self.engine.catalog.close()
        if self.engine.tracing is not None:
            self.engine.tracing.close()

    async def refresh_board(self) -> None:
        """Reads the replicas' latest figures (off the event loop) for Stats and /metrics."""
        try:
            self.engine.board_records = await asyncio.to_thread(self.board.records)
        except Exception as exc:  # noqa: BLE001 - figures for operators: kept as they were until the next read
            log.warning("could not read the replicas' figures (%s)", exc)
            return
        self.engine.channels.update(self.engine.board_records)   # the direct path's targets

    async def _refresh_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.refresh_board()

    async def serve_until_signal(self) -> None:
        """Until SIGTERM / SIGINT; the Serve application keeps running after the edge stops."""
        await serve_until_signal(self.start, self.stop)


async def build_cluster_app(config: ServerConfig, *, deploy: bool = True) -> ClusterApp:
    """Deploys (``deploy``) or finds the Serve application, and builds the edge over it."""
    loop = asyncio.get_running_loop()
    if deploy:
        await loop.run_in_executor(None, connect, config)
    elif not ray.is_initialized():
        _init_ray(config)
    shards = edge_handle(config.cluster.app_name)
    info = await shards.info.remote()
    config.data_dir.mkdir(parents=True, exist_ok=True)
    backend = await loop.run_in_executor(None, open_bucket, config, None)   # the catalog lives in the bucket too
    catalog = await loop.run_in_executor(None, functools.partial(Catalog, config.data_dir / "system",
                                                                 open_log=backend.catalog_opener()))
    new_admin_key = catalog.ensure_admin_key(config.admin_key)
    engine = ClusterEngine(config=config, shards=shards, catalog=catalog, info=info)
    board = Board(backend.store)
    metrics = None
    if config.metrics_listen or config.console_listen:   # the edge's RPC and query figures, the replicas'
        metrics = Metrics()
        metrics.registry.register(ReplicaCollector(lambda: engine.board_records))
        metrics.registry.register(HopCollector(lambda: engine.hop_counts))
    frontend = GrpcFrontend(engine, listen=config.listen, tls_cert=config.tls_cert,  # type: ignore[arg-type]
                            tls_key=config.tls_key, tls_client_ca=config.tls_client_ca, metrics=metrics)
    # The console calls the engine methods the servicers call: ClusterEngine's, so every page reads the replicas.
    console = (ConsoleFrontend(engine, listen=config.console_listen, metrics=metrics,  # type: ignore[arg-type]
                               tls_cert=config.tls_cert, tls_key=config.tls_key, tls_client_ca=config.tls_client_ca)
               if config.console_listen else None)
    return ClusterApp(config=config, engine=engine, frontend=frontend, new_admin_key=new_admin_key, board=board,
                      metrics=metrics, console=console)

