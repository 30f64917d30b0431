"""The model hop's transport (TenantShard replica -> Encoder / Reranker replica): length-prefixed frames over
plain TCP, one connection per calling thread, served by one thread per connection that runs the handler itself.

Why not gRPC here: a forward is a blocking call from the shard replica's device thread, and on the model replica
a ``grpc.aio`` method reaches the forward pass through gRPC's poller thread, the event loop and an executor
thread, and answers back the same way: several thread wake-ups on each side of every forward, which on a few
busy cores cost more than the pass's payload (a few KB). Here the caller's thread writes its frame and blocks
in ``recv``; the connection's thread on the model replica wakes from its own ``recv``, runs the handler (which
joins a forward pass, :class:`server.cluster.passes.Passes`) and writes the answer back.

The protocol, per connection: the caller first sends the replica's token (:data:`TOKEN_BYTES` ASCII bytes),
checked before anything else is read (a wrong one closes the connection); then any number of calls, each a
request frame (4-byte big-endian length, body) answered by a reply frame (1 status byte: 0 answered, 1 the
handler failed; 4-byte length; body). Every failure reaches the caller as :class:`HopFailed`, as on the gRPC
direct path; the model stand-in then sends the forward through Serve (a forward changes nothing).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import secrets
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

TOKEN_BYTES = 32                 # secrets.token_hex(16)
HELLO_TIMEOUT_S = 10.0           # a connection that sends no token in time is closed
MAX_FRAME_BYTES = 1 << 30        # a batch of vectors or texts is far smaller; a garbled length is refused
_LENGTH = struct.Struct(">I")
_REPLY = struct.Struct(">BI")
OK, FAILED = 0, 1


class HopFailed(Exception):
    """A direct call that did not answer: ``code`` names why, as gRPC status names do (``UNAVAILABLE``: the peer
    could not be reached or went away; ``DEADLINE_EXCEEDED``: the call's time ran out; ``INTERNAL``: its handler
    raised); ``deadline`` when its time ran out; ``sent`` False when the call never left this process."""

    def __init__(self, code: str, *, sent: bool = True) -> None:
        super().__init__(code)
        self.code = code
        self.deadline = code == "DEADLINE_EXCEEDED"
        self.sent = sent   # False: the call never left (no connection could be made): nothing can have run


@dataclass(frozen=True)
class Target:
    """Where one replica's direct method answers, and the token it answers."""

    address: str
    token: str

    def as_dict(self) -> dict[str, str]:
        return {"address": self.address, "token": self.token}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Target | None:
        if not d or not d.get("address") or not d.get("token"):
            return None
        return cls(address=str(d["address"]), token=str(d["token"]))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # a frame goes out at once, never after an ACK
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 2), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 2)):   # a lost peer: ~6 s
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


class FrameServer:
    """``handle(body) -> bytes`` for callers that send this server's token, run on the thread of the caller's
    connection (one thread per connection: a shard replica opens one per thread that forwards)."""

    def __init__(self, handle: Callable[[bytes], bytes]) -> None:
        self.token = secrets.token_hex(TOKEN_BYTES // 2)
        self._handle = handle
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.target: Target | None = None

    def start(self, host: str) -> Target:
        listener = socket.create_server((host, 0), backlog=128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="frames-accept", daemon=True).start()
        self.target = Target(address=f"{host}:{listener.getsockname()[1]}", token=self.token)
        return self.target

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return   # stopped
            _tune(conn)
            with self._lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="frames-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(HELLO_TIMEOUT_S)
            sent = _recv_exact(conn, TOKEN_BYTES)
            if not hmac.compare_digest(sent, self.token.encode()):
                return   # not a caller of this replica: nothing read beyond the token
            conn.settimeout(None)   # a caller's connection waits for its next forward as long as it lives
            while True:
                (n,) = _LENGTH.unpack(_recv_exact(conn, _LENGTH.size))
                if n > MAX_FRAME_BYTES:
                    return
                body = _recv_exact(conn, n)
                try:
                    reply, status = self._handle(body), OK
                except Exception:
                    log.exception("a direct forward failed")
                    reply, status = b"", FAILED
                conn.sendall(_REPLY.pack(status, len(reply)) + reply)
        except OSError:
            pass   # the caller went away (or the server stopped)
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):   # wakes the accept thread (a bare close would leave it listening)
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class FrameClient:
    """Calls one :class:`FrameServer`: a connection per calling thread at a time (idle ones kept for the next
    call); a connection whose call failed is closed. ``call`` blocks its thread."""

    def __init__(self, target: Target) -> None:
        self.target = target
        host, _, port = target.address.rpartition(":")
        self._address = (host, int(port))
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False

    def _connection(self, timeout: float | None) -> socket.socket:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        sock = socket.create_connection(self._address, timeout=timeout)
        _tune(sock)
        sock.sendall(self.target.token.encode())
        return sock

    def call(self, body: bytes, *, timeout: float | None) -> bytes:
        try:
            sock = self._connection(timeout)
        except OSError as exc:
            raise HopFailed("UNAVAILABLE", sent=False) from exc
        try:
            sock.settimeout(timeout)
            sock.sendall(_LENGTH.pack(len(body)) + body)
            status, n = _REPLY.unpack(_recv_exact(sock, _REPLY.size))
            reply = _recv_exact(sock, n)
        except TimeoutError as exc:
            sock.close()
            raise HopFailed("DEADLINE_EXCEEDED") from exc
        except OSError as exc:   # reset, refused, closed (a wrong token closes it too)
            sock.close()
            raise HopFailed("UNAVAILABLE") from exc
        with self._lock:
            if self._closed:
                sock.close()
            else:
                self._idle.append(sock)
        if status != OK:
            raise HopFailed("INTERNAL")
        return reply

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for sock in idle:
            sock.close()
