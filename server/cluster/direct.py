"""The direct data path of ``engram serve --ray``: the steady state's calls without a Ray actor call.

A Serve handle call is a Ray actor call: pickling, the raylet / core-worker path and several thread wake-ups on
each side, ~10 ms on two busy cores. So every TenantShard, Encoder and Reranker replica also serves one
``grpc.aio`` method on its own event loop (:class:`DirectServer`), bytes in and bytes out, behind a random
token the replica makes at start:

- edge -> TenantShard: the call the edge already authorized, pickled as the Serve call's arguments
  (:data:`SHARD_CALL`); the replica runs exactly its Serve method's code on it, or answers :class:`Refused`
  when the tenant is not loaded there or another replica took its log (the edge then takes the Serve path,
  which loads it / fails over as it always did). A replica publishes its address and token with its figures
  (server/cluster/board.py); the edge sends a tenant's call there only when the consistent-hash ring of its own
  Serve handle names that replica and the channel is connected (:class:`ShardChannels`).
- TenantShard -> Encoder / Reranker: a forward's items in, the ``@serve.batch`` pass's rows out as raw float32
  bytes (:data:`MODEL_CALL`); the same batches form across tenants and replicas (server/cluster/remote_models.py).

Whatever goes wrong on a direct call that cannot have changed anything falls back to the Serve path; a
mutating call lost after it was sent answers UNAVAILABLE, as a lost Serve call does. The token keeps anyone
else on the network from calling (it is checked before anything is unpickled); it travels only over Ray and
through the bucket, both of which a cluster already trusts.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

log = logging.getLogger(__name__)

SHARD_CALL = "/engram.cluster.TenantShard/Call"
MODEL_CALL = "/engram.cluster.Model/Forward"
TOKEN_HEADER = "x-engram-hop-token"
# No limit beyond the Serve path's (none): a Write's memories, a search's results, a batch's vectors.
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
# A peer that went away without closing its connections (a lost machine, a partition) is noticed by a ping
# unanswered within ~4 s: the call in flight fails UNAVAILABLE instead of waiting out its deadline.
CLIENT_OPTIONS = [*UNLIMITED, ("grpc.keepalive_time_ms", 2000), ("grpc.keepalive_timeout_ms", 2000),
                  ("grpc.keepalive_permit_without_calls", 1)]
SERVER_OPTIONS = [*UNLIMITED, ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_ping_strikes", 0),
                  ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000)]


@dataclass(frozen=True)
class Refused:
    """A replica's answer to a direct call it will not run (the tenant is not loaded there, or was taken
    over): nothing was done; the edge takes the Serve path."""

    reason: str


@dataclass(frozen=True)
class Crashed:
    """A direct call that raised a non-domain exception on the replica (logged there with its traceback): INTERNAL
    at the edge, as the Serve path's wrapped exception is."""


@dataclass(frozen=True)
class Target:
    """Where one replica's direct method answers."""

    address: str
    token: str

    def as_dict(self) -> dict[str, str]:
        return {"address": self.address, "token": self.token}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Target | None:
        if not d or not d.get("address") or not d.get("token"):
            return None
        return cls(address=str(d["address"]), token=str(d["token"]))


class DirectServer:
    """One ``grpc.aio`` method (``path``) on the running event loop: ``handle(body) -> bytes``, bytes in and out,
    for callers that send this server's token."""

    def __init__(self, path: str, handle: Callable[[bytes], Awaitable[bytes]]) -> None:
        self.token = secrets.token_hex(16)
        self._handle = handle
        self._path = path
        self._server: grpc.aio.Server | None = None
        self.target: Target | None = None

    async def start(self, host: str) -> Target:
        server = grpc.aio.server(options=SERVER_OPTIONS)
        rpc = grpc.unary_unary_rpc_method_handler(self._serve)   # no (de)serializers: bytes as they came
        service, _, method = self._path.strip("/").partition("/")
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {method: rpc}),))
        port = server.add_insecure_port(f"{host}:0")
        await server.start()
        self._server = server
        self.target = Target(address=f"{host}:{port}", token=self.token)
        return self.target

    async def _serve(self, body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        sent = dict(context.invocation_metadata() or ()).get(TOKEN_HEADER, "")
        if not hmac.compare_digest(str(sent).encode(), self.token.encode()):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not a caller of this replica")
        return await self._handle(body)

    async def stop(self, grace_s: float | None = None) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)


def node_host() -> str:
    """The address other nodes reach this process at (Ray's node IP)."""
    import ray

    return str(ray.util.get_node_ip_address())


def metadata(token: str) -> tuple[tuple[str, str], ...]:
    return ((TOKEN_HEADER, token),)


class ShardChannels:
    """The edge's channels to the TenantShard replicas' direct methods, by replica id, from their published
    records; a channel is used only while it is connected (it connects in the background)."""

    def __init__(self) -> None:
        self._targets: dict[str, Target] = {}
        self._channels: dict[str, tuple[grpc.aio.Channel, Any]] = {}   # address -> (channel, unary callable)

    def update(self, records: Sequence[Mapping[str, Any]]) -> list[grpc.aio.Channel]:
        """The live replicas' targets (the board's records); returns the channels no replica uses any more,
        for the caller to close."""
        targets = {str(r["replica"]): t for r in records if (t := Target.from_dict(r.get("direct"))) is not None}
        self._targets = targets
        live = {t.address for t in targets.values()}
        for address in live - set(self._channels):
            channel = grpc.aio.insecure_channel(address, options=CLIENT_OPTIONS)
            channel.get_state(try_to_connect=True)
            self._channels[address] = (channel, channel.unary_unary(SHARD_CALL))
        return [self._channels.pop(a)[0] for a in set(self._channels) - live]

    def drop(self, address: str) -> grpc.aio.Channel | None:
        """Forgets a replica whose direct call failed, until its record is read again."""
        for replica, target in list(self._targets.items()):
            if target.address == address:
                del self._targets[replica]
        entry = self._channels.pop(address, None)
        return None if entry is None else entry[0]

    def route(self, replica: str | None) -> tuple[Target, Any] | None:
        """The replica's target and unary callable when it published one and its channel is connected."""
        target = self._targets.get(replica) if replica is not None else None
        entry = self._channels.get(target.address) if target is not None else None
        if target is None or entry is None:
            return None
        if entry[0].get_state(try_to_connect=True) != grpc.ChannelConnectivity.READY:
            return None
        return target, entry[1]


def ring_owner(handle: Any, key: str) -> str | None:
    """The replica id the Serve handle's consistent-hash router gives ``key`` now (the replica a Serve call would
    reach first), or None when the router is not up or not a consistent-hash one. Reads the router's ring
    (Ray Serve's ConsistentHashRouter, private): anything unexpected there answers None, i.e. the Serve path."""
    try:
        router = handle._router._asyncio_router.request_router
        ranked = router._lookup_ranked_replicas(key)
    except Exception:  # noqa: BLE001 - Serve's internals moved: the Serve path still works
        return None
    return str(ranked[0].unique_id) if ranked else None
