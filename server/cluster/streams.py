"""The edge -> TenantShard hop's transport: the frames of server/cluster/frames.py over asyncio streams, on the
edge's and the replica's own event loops.

Why not gRPC here: a ``grpc.aio`` call reaches the event loop through gRPC's poller thread on each side, for the
request, the reply and the end of the call; with plain streams the loop wakes once on each side, from its own
``epoll`` (a few KB each way: the pickled call and its answer). The edge keeps idle connections per replica and
opens another when every one is busy; a lost peer is noticed by TCP keepalive (~6 s, server/cluster/frames.py)
when the call has no deadline of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from server.cluster.frames import (
    _LENGTH,
    _REPLY,
    FAILED,
    HELLO_TIMEOUT_S,
    MAX_FRAME_BYTES,
    OK,
    TOKEN_BYTES,
    HopFailed,
    Target,
    _tune,
)

log = logging.getLogger(__name__)


class StreamServer:
    """``await handle(body) -> bytes`` on the running event loop, for callers that send this server's token."""

    def __init__(self, handle: Callable[[bytes], Awaitable[bytes]]) -> None:
        self.token = secrets.token_hex(TOKEN_BYTES // 2)
        self._handle = handle
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._busy = 0
        self._idle = asyncio.Event()
        self.target: Target | None = None

    async def start(self, host: str) -> Target:
        self._server = await asyncio.start_server(self._serve, host, 0, backlog=128)
        port = self._server.sockets[0].getsockname()[1]
        self.target = Target(address=f"{host}:{port}", token=self.token)
        return self.target

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            _tune(sock)
        self._writers.add(writer)
        try:
            sent = await asyncio.wait_for(reader.readexactly(TOKEN_BYTES), HELLO_TIMEOUT_S)
            if not hmac.compare_digest(sent, self.token.encode()):
                return   # not a caller of this replica: nothing read beyond the token
            while True:
                (n,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
                if n > MAX_FRAME_BYTES:
                    return
                body = await reader.readexactly(n)
                self._busy += 1
                self._idle.clear()
                try:
                    try:
                        reply, status = await self._handle(body), OK
                    except Exception:
                        log.exception("a direct call failed")
                        reply, status = b"", FAILED
                    writer.write(_REPLY.pack(status, len(reply)) + reply)
                    await writer.drain()
                finally:
                    self._busy -= 1
                    if not self._busy:
                        self._idle.set()
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass   # the caller went away, or sent no token in time
        finally:
            self._writers.discard(writer)
            writer.close()

    async def stop(self, grace_s: float | None = None) -> None:
        """Stops listening; calls still running get ``grace_s`` to answer, then every connection is closed."""
        if self._server is None:
            return
        self._server.close()
        if self._busy and grace_s:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace_s)
        for writer in list(self._writers):
            writer.close()


class StreamClient:
    """Calls one :class:`StreamServer` from one event loop: one call at a time per connection, idle connections
    kept for the next call. ``ready`` once a connection was made (:meth:`connect`)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        host, _, port = target.address.rpartition(":")
        self._address = (host, int(port))
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._closed = False
        self.ready = False

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(*self._address)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            _tune(sock)
        writer.write(self.target.token.encode())
        return reader, writer

    async def connect(self) -> None:
        """Opens one connection (kept idle) so that :attr:`ready` says the replica can be reached."""
        try:
            self._idle.append(await asyncio.wait_for(self._open(), HELLO_TIMEOUT_S))
            self.ready = not self._closed
        except (OSError, TimeoutError):
            self.ready = False

    def _live_idle(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """An idle connection the peer has not closed (a replica that died or stopped closed its end: the loop
        saw it while the connection sat idle), closing the others."""
        while self._idle:
            conn = self._idle.pop()
            reader, writer = conn
            if not (reader.at_eof() or writer.is_closing() or reader.exception() is not None):
                return conn
            _close(conn)
        return None

    async def call(self, body: bytes, *, timeout: float | None) -> bytes:
        conn = None
        try:
            async with asyncio.timeout(timeout):
                conn = self._live_idle()
                if conn is None:
                    try:
                        conn = await self._open()
                    except OSError as exc:   # refused, unreachable: the call never left
                        self.ready = False
                        raise HopFailed("UNAVAILABLE", sent=False) from exc
                reader, writer = conn
                writer.write(_LENGTH.pack(len(body)) + body)
                status, n = _REPLY.unpack(await reader.readexactly(_REPLY.size))
                reply = await reader.readexactly(n)
        except TimeoutError as exc:
            _close(conn)
            raise HopFailed("DEADLINE_EXCEEDED") from exc
        except (OSError, asyncio.IncompleteReadError) as exc:   # reset, refused, closed (a wrong token closes it)
            _close(conn)
            self.ready = False
            raise HopFailed("UNAVAILABLE") from exc
        except BaseException:   # cancelled: the reply may still come on this connection; never reuse it
            _close(conn)
            raise
        if self._closed:
            _close(conn)
        else:
            self._idle.append(conn)
        if status != OK:
            raise HopFailed("INTERNAL")
        return reply

    def close(self) -> None:
        """Closes the idle connections now, and each busy one when its call ends (its caller still answered)."""
        self._closed = True
        self.ready = False
        idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)


def _close(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None) -> None:
    if conn is not None:
        conn[1].close()


class ShardLinks:
    """The edge's clients of the TenantShard replicas' direct methods, by replica id, from their published
    records; a replica's client is used only once it reached the replica (it connects in the background)."""

    def __init__(self) -> None:
        self._targets: dict[str, Target] = {}
        self._clients: dict[str, StreamClient] = {}   # address -> client
        self._connecting: set[asyncio.Task[None]] = set()   # held until done: the loop keeps only weak references

    def update(self, records: Sequence[Mapping[str, Any]]) -> None:
        """The live replicas' targets (the board's records); a replica no longer there has its client closed."""
        targets = {str(r["replica"]): t for r in records if (t := Target.from_dict(r.get("direct"))) is not None}
        self._targets = targets
        live = {t.address: t for t in targets.values()}
        for address, target in live.items():
            client = self._clients.get(address)
            if client is None or client.target != target or not client.ready:
                if client is not None:
                    client.close()
                self._clients[address] = client = StreamClient(target)
                task = asyncio.get_running_loop().create_task(client.connect())
                self._connecting.add(task)
                task.add_done_callback(self._connecting.discard)
        for address in set(self._clients) - set(live):
            self._clients.pop(address).close()

    def drop(self, address: str) -> None:
        """Forgets a replica whose direct call failed, until its record is read again."""
        for replica, target in list(self._targets.items()):
            if target.address == address:
                del self._targets[replica]
        client = self._clients.pop(address, None)
        if client is not None:
            client.close()

    def route(self, replica: str | None) -> StreamClient | None:
        """The replica's client when it published a target and its client reached it."""
        target = self._targets.get(replica) if replica is not None else None
        client = self._clients.get(target.address) if target is not None else None
        return client if client is not None and client.ready and client.target == target else None

