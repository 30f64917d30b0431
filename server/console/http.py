"""A small HTTP/1.1 server on asyncio streams: what the console needs and no more.

One request at a time per connection (keep-alive, no pipelining), bodies by ``Content-Length`` only
(``Transfer-Encoding`` is refused, so no request can be read two ways), bounded heads, bodies,
connections and idle time. The handler returns a :class:`Response`; the server adds ``Content-Length``,
``Date`` and the default (security) headers to every response, errors included.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 1 << 20
DISCARD_BYTES = 8 << 20   # what a refused oversized body may still send before the connection closes
MAX_HEADERS = 100
METHODS = frozenset({"GET", "HEAD", "POST"})
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class HttpError(Exception):
    """A request the server answers with ``status`` before any handler sees it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Request:
    method: str
    path: str                       # percent-decoded
    query: dict[str, list[str]]
    headers: dict[str, str]         # lower-case names; repeated headers joined with ", "
    body: bytes = b""
    remote: str = ""
    scheme: str = "http"

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def param(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def params(self, name: str) -> list[str]:
        return [v for v in self.query.get(name, []) if v]

    def cookies(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for part in self.header("cookie").split(";"):
            name, sep, value = part.strip().partition("=")
            if sep and name and name not in out:
                out[name] = value.strip().strip('"')
        return out


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[Request], Awaitable[Response]]


def parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """The request line and headers of one request head (without the blank line); raises HttpError."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise HttpError(400, "undecodable request head") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505, "only HTTP/1.1 and HTTP/1.0")
    if not method or not set(method) <= _TOKEN:
        raise HttpError(400, "malformed method")
    if not target.startswith("/"):
        raise HttpError(400, "the request target must be a path")
    headers: dict[str, str] = {}
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpError(431, "too many headers")
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or not set(name) <= _TOKEN:   # also refuses obsolete line folding
            raise HttpError(400, "malformed header line")
        key = name.lower()
        value = value.strip(" \t")
        if key in headers:
            if key in ("content-length", "host"):
                raise HttpError(400, f"repeated {key} header")
            headers[key] = f"{headers[key]}, {value}"
        else:
            headers[key] = value
    return method, target, version, headers


def body_length(headers: dict[str, str], *, max_body_bytes: int) -> int:
    if "transfer-encoding" in headers:
        raise HttpError(501, "Transfer-Encoding is not supported; send Content-Length")
    raw = headers.get("content-length", "")
    if not raw:
        return 0
    if not raw.isdigit():
        raise HttpError(400, "malformed Content-Length")
    length = int(raw)
    if length > max_body_bytes:
        raise HttpError(413, f"request body larger than {max_body_bytes} bytes")
    return length


def make_request(method: str, target: str, headers: dict[str, str], body: bytes, *, remote: str,
                 scheme: str) -> Request:
    parts = urlsplit(target)
    try:
        query = parse_qs(parts.query, keep_blank_values=True, max_num_fields=200, errors="strict")
        path = unquote(parts.path, errors="strict")
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, "malformed request target") from exc
    return Request(method=method, path=path, query=query, headers=headers, body=body, remote=remote, scheme=scheme)


def encode_response(response: Response, *, head_only: bool, keep_alive: bool,
                    default_headers: Sequence[tuple[str, str]]) -> bytes:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {response.status} {reason}", f"Date: {email.utils.formatdate(usegmt=True)}",
             f"Content-Length: {len(response.body)}", f"Connection: {'keep-alive' if keep_alive else 'close'}"]
    if response.body or response.content_type:
        lines.append(f"Content-Type: {response.content_type}")
    names = {name.lower() for name, _ in response.headers}
    lines.extend(f"{name}: {value}" for name, value in default_headers if name.lower() not in names)
    lines.extend(f"{name}: {value}" for name, value in response.headers)
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


class HttpServer:
    def __init__(self, handler: Handler, *, default_headers: Sequence[tuple[str, str]] = (),
                 max_connections: int = 128, idle_timeout_s: float = 15.0, read_timeout_s: float = 30.0,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._handler = handler
        self._default_headers = list(default_headers)
        self._max_connections = max_connections
        self._idle_timeout_s = idle_timeout_s
        self._read_timeout_s = read_timeout_s
        self._max_body_bytes = max_body_bytes
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._scheme = "http"

    async def start(self, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None) -> int:
        """Listens on host:port (port 0: any free one) and returns the bound port."""
        self._scheme = "https" if ssl_context is not None else "http"
        self._server = await asyncio.start_server(self._serve, host=host or None, port=port, ssl=ssl_context,
                                                  limit=MAX_HEAD_BYTES)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self._max_connections:
            writer.close()
            return
        self._connections.add(writer)
        peer = writer.get_extra_info("peername")
        remote = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        try:
            while await self._one(reader, writer, remote):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, remote: str) -> bool:
        """Reads and answers one request; False when the connection should close."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._idle_timeout_s)
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                await self._send(writer, Response(400, b'{"error": "incomplete request"}'), keep_alive=False)
            return False
        except asyncio.LimitOverrunError:
            await self._send(writer, Response(431, b'{"error": "request head too large"}'), keep_alive=False)
            return False
        head_only = False
        try:
            method, target, version, headers = parse_head(head[:-4])
            head_only = method == "HEAD"
            length = body_length(headers, max_body_bytes=self._max_body_bytes)
            body = await asyncio.wait_for(reader.readexactly(length), self._read_timeout_s) if length else b""
            if method not in METHODS:
                raise HttpError(405, "method not allowed")
            request = make_request(method, target, headers, body, remote=remote, scheme=self._scheme)
        except HttpError as exc:
            await self._send(writer, Response(exc.status, json.dumps({"error": {"message": str(exc)}}).encode()),
                             keep_alive=False, head_only=head_only)
            if exc.status == 413:
                await self._discard(reader)
            return False
        keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        response = await self._handler(request)
        await self._send(writer, response, keep_alive=keep_alive, head_only=head_only)
        return keep_alive

    async def _discard(self, reader: asyncio.StreamReader) -> None:
        """After a 413, reads (and drops) what the client is still sending, at most DISCARD_BYTES within the read
        timeout: closing at once would reset a client mid-body, which then never sees the answer."""
        left = DISCARD_BYTES
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self._read_timeout_s):
                while left > 0 and (chunk := await reader.read(min(left, 1 << 16))):
                    left -= len(chunk)

    async def _send(self, writer: asyncio.StreamWriter, response: Response, *, keep_alive: bool,
                    head_only: bool = False) -> None:
        writer.write(encode_response(response, head_only=head_only, keep_alive=keep_alive,
                                     default_headers=self._default_headers))
        await writer.drain()
