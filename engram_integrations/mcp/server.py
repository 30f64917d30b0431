"""engram as an MCP server (the official ``mcp`` SDK's low-level ``Server``), talking to a running engram
server through the asyncio SDK client, over stdio or streamable HTTP.

stdio: one key (``--key`` / ``ENGRAM_KEY``) for the whole process. HTTP: each request's
``Authorization: Bearer <engram key>`` is checked against engram (a key engram refuses gets 401) and is
the key of that request's calls. Either way the tenant is the configured one (``--tenant``) or, when
none is, the one tenant the key covers; no tool argument names a tenant.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import mcp.types as mt
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

from engram_integrations.mcp.tools import TOOLS, TOOLS_BY_NAME
from engram_client import AsyncEngramClient, with_key

log = logging.getLogger(__name__)
SCOPE_TTL_S = 60.0
INSTRUCTIONS = ("engram is your long-term memory. Before answering, call recall with the user's message and "
                "use its context; after answering, call remember with anything worth keeping and the ids "
                "of the recalled memories you used.")


@dataclass
class _Scope:
    tenants: list[str]
    until: float


class Backend:
    """Where tool calls go: one channel to engram, a client per key on it, and the tenant each key acts on.

    Create it inside the event loop that serves the tools (grpc.aio channels belong to one loop)."""

    def __init__(self, address: str, *, tenant_id: str = "", timeout_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tenant_id = tenant_id
        self._base = AsyncEngramClient(address, timeout_s=timeout_s)
        self._clock = clock
        self._scopes: dict[str, _Scope] = {}

    def client(self, key: str) -> AsyncEngramClient:
        return with_key(self._base, key)

    async def tenants(self, key: str) -> list[str]:
        """The tenants the key covers (ListTenants), cached for a minute; raises the gRPC error for a bad key."""
        digest = hashlib.sha256(key.encode()).hexdigest()
        scope = self._scopes.get(digest)
        if scope is None or scope.until < self._clock():
            scope = _Scope(await self.client(key).list_tenants(), self._clock() + SCOPE_TTL_S)
            self._scopes[digest] = scope
        return scope.tenants

    async def tenant(self, key: str) -> str:
        """The configured tenant, else the one the key covers. engram itself checks the key on every call."""
        if self.tenant_id:
            return self.tenant_id
        tenants = await self.tenants(key)
        if len(tenants) != 1:
            names = ", ".join(tenants[:5]) + (", ..." if len(tenants) > 5 else "")
            raise LookupError(f"this key covers {len(tenants)} tenants ({names or 'none'}); "
                              "start `engram mcp` with --tenant to choose one")
        return tenants[0]

    async def close(self) -> None:
        await self._base.close()


def key_id(key: str) -> str:
    """The public part of an ``egk_<id>_<secret>`` key (a hash for other shapes): the HTTP principal."""
    parts = key.split("_")
    return parts[1] if len(parts) >= 3 and parts[0] == "egk" else hashlib.sha256(key.encode()).hexdigest()[:16]


def error_result(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def _validation_text(name: str, exc: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors())
    return f"INVALID_ARGUMENT: bad arguments for {name}: {problems}"


def tool_list() -> list[mt.Tool]:
    return [mt.Tool(name=t.name, title=t.title, description=t.description, input_schema=t.input_schema(),
                    annotations=mt.ToolAnnotations(title=t.title, read_only_hint=t.read_only,
                                                   destructive_hint=t.destructive, open_world_hint=False))
            for t in TOOLS]


def build_server(backend: Backend, *, key_of: Callable[[ServerRequestContext[Any]], str]) -> Server[Any]:
    """The MCP server; ``key_of`` says which engram key a request carries (stdio: the configured one)."""

    async def list_tools(ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
                         ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        spec = TOOLS_BY_NAME.get(params.name)
        if spec is None:
            return error_result(f"unknown tool {params.name!r}; tools: {', '.join(TOOLS_BY_NAME)}")
        try:
            args = spec.args.model_validate(params.arguments or {})
        except ValidationError as exc:
            return error_result(_validation_text(spec.name, exc))
        key = key_of(ctx)
        try:
            data = await spec.run(backend.client(key), await backend.tenant(key), args)
        except grpc.RpcError as exc:  # the server's status text, as the gRPC client would see it
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            return error_result(f"{code}: {exc.details() if hasattr(exc, 'details') else exc}")
        except (LookupError, ValueError) as exc:
            return error_result(f"INVALID_ARGUMENT: {exc}")
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
                                 structured_content=data)

    return Server("engram", version="1", title="engram memory", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


# -- stdio -------------------------------------------------------------------------------------------------
async def serve_stdio(*, address: str, key: str, tenant_id: str = "", timeout_s: float = 30.0) -> None:
    backend = Backend(address, tenant_id=tenant_id, timeout_s=timeout_s)
    server = build_server(backend, key_of=lambda ctx: key)
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await backend.close()


# -- streamable HTTP -----------------------------------------------------------------------------------------
class EngramKeyVerifier:
    """The MCP SDK's TokenVerifier: a bearer token is valid when engram accepts it as a key."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            await self.backend.tenants(token)
        except grpc.RpcError as exc:
            if hasattr(exc, "code") and exc.code() in (grpc.StatusCode.UNAUTHENTICATED,
                                                       grpc.StatusCode.PERMISSION_DENIED):
                return None
            raise
        return AccessToken(token=token, client_id=key_id(token), scopes=[])


def _bearer(ctx: ServerRequestContext[Any]) -> str:
    request = ctx.request
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    token = getattr(getattr(user, "access_token", None), "token", "")
    if not token:  # the auth middleware lets no request without a valid key this far
        raise PermissionError("no bearer key on this request")
    return str(token)


def http_app(backend: Backend, *, url: str, path: str = "/mcp", host: str = "127.0.0.1") -> Any:
    """The Starlette app: streamable HTTP at ``path``, every request authenticated by its engram key."""
    server = build_server(backend, key_of=_bearer)
    auth = AuthSettings(issuer_url=url, resource_server_url=None)
    return server.streamable_http_app(streamable_http_path=path, auth=auth, token_verifier=EngramKeyVerifier(backend),
                                      host=host)


async def serve_http(*, address: str, listen: str, tenant_id: str = "", timeout_s: float = 30.0,
                     path: str = "/mcp", ready: Callable[[str], None] | None = None) -> None:
    """Serves until cancelled. ``listen`` is host:port (port 0: any free one); ``ready`` gets the URL."""
    import uvicorn

    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port or 0)))
    bound = sock.getsockname()[1]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{bound}{path}"
    backend = Backend(address, tenant_id=tenant_id, timeout_s=timeout_s)
    app = http_app(backend, url=url, path=path, host=host)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    sock.listen(128)  # connections queue from here on, so the URL can be announced before uvicorn starts
    (ready or (lambda u: sys.stderr.write(f"engram mcp: streamable HTTP at {u}\n")))(url)
    try:
        await server.serve([sock])
    finally:
        await backend.close()
