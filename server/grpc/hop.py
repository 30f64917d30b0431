"""The transport of the direct data path of ``engram serve --ray`` (server/cluster/direct.py says what travels on
it and why): one ``grpc.aio`` method per replica, bytes in and bytes out, behind the replica's random token, and
the callers' channels. Here because gRPC is spoken only under server/grpc; a failed call reaches the cluster's code
as :class:`HopFailed`, never as a gRPC type.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

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



class HopFailed(Exception):
    """A direct call that did not answer: ``code`` is the gRPC status name; ``deadline`` when its time ran out."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code
        self.deadline = code == grpc.StatusCode.DEADLINE_EXCEEDED.name


def _failed(exc: grpc.RpcError) -> HopFailed:
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    return HopFailed(code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN")


async def send(call: Any, body: bytes, *, token: str, timeout: float | None) -> bytes:
    """One direct call on an asyncio channel's unary callable (:meth:`ShardChannels.route`)."""
    try:
        return bytes(await call(body, timeout=timeout, metadata=metadata(token)))
    except grpc.RpcError as exc:
        raise _failed(exc) from exc


def send_blocking(call: Any, body: bytes, *, token: str, timeout: float | None) -> bytes:
    """One direct call on a blocking channel's unary callable (:func:`blocking_channel`)."""
    try:
        return bytes(call(body, timeout=timeout, metadata=metadata(token)))
    except grpc.RpcError as exc:
        raise _failed(exc) from exc


def blocking_channel(address: str, path: str) -> tuple[Any, Callable[[], None]]:
    """A blocking channel's unary callable for ``path`` at ``address``, and how to close the channel."""
    channel = grpc.insecure_channel(address, options=CLIENT_OPTIONS)
    return channel.unary_unary(path), channel.close


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


def metadata(token: str) -> tuple[tuple[str, str], ...]:
    return ((TOKEN_HEADER, token),)


class ShardChannels:
    """The edge's channels to the TenantShard replicas' direct methods, by replica id, from their published
    records; a channel is used only while it is connected (it connects in the background)."""

    def __init__(self) -> None:
        self._targets: dict[str, Target] = {}
        self._channels: dict[str, tuple[grpc.aio.Channel, Any]] = {}   # address -> (channel, unary callable)
        self._closing: set[asyncio.Task[None]] = set()   # held until done: the loop keeps only weak references

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

    def retire(self, channel: grpc.aio.Channel, grace_s: float) -> None:
        """Closes a channel :meth:`update` or :meth:`drop` gave back, with a grace: closing at once cancels the
        calls still on it, whose callers would then never be answered."""
        task = asyncio.get_running_loop().create_task(channel.close(grace_s))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def route(self, replica: str | None) -> tuple[Target, Any] | None:
        """The replica's target and unary callable when it published one and its channel is connected."""
        target = self._targets.get(replica) if replica is not None else None
        entry = self._channels.get(target.address) if target is not None else None
        if target is None or entry is None:
            return None
        if entry[0].get_state(try_to_connect=True) != grpc.ChannelConnectivity.READY:
            return None
        return target, entry[1]
