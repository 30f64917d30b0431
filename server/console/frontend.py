"""The console's edge: static assets, login sessions, same-origin and CSRF checks, security headers, and
the mapping of domain errors to HTTP statuses (the console's counterpart of ``server/grpc/interceptors``).

Keys are checked by the same ``Catalog.authenticate`` the gRPC edge uses, on every request; the tenant is
authorized by the engine method each route calls. A full disk (the watermark, or ENOSPC / EDQUOT from any
layer) is 507 Insufficient Storage with "storage full", as gRPC answers RESOURCE_EXHAUSTED; unknown
exceptions become 500 with a generic message and the request id; the traceback goes to the log, never to
the page.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from server.console.api import ConsoleApi
from server.console.codec import to_json
from server.console.http import HttpServer, Request, Response
from server.console.sessions import Session, Sessions
from server.domain import KeyScope
from server.engine.engine import Engine
from server.errors import (ConfigError, InvalidArgument, PermissionDenied, StorageFull, as_client_error,
                           status_code_name)
from server.grpc.interceptors import REQUEST_ID
from server.metrics import Metrics

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
COOKIE = "engram_console"
CSRF_HEADER = "x-csrf-token"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = (("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
                    ("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer"),
                    ("Cross-Origin-Opener-Policy", "same-origin"), ("Cross-Origin-Resource-Policy", "same-origin"),
                    ("Permissions-Policy", "camera=(), microphone=(), geolocation=()"),
                    ("Cache-Control", "no-store"))
# Domain error codes (server/errors.py) as HTTP statuses.
HTTP_STATUS = {"INVALID_ARGUMENT": 400, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
               "ALREADY_EXISTS": 409, "FAILED_PRECONDITION": 409, "RESOURCE_EXHAUSTED": 429, "CANCELLED": 503,
               "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504, "INTERNAL": 500}


def load_assets(directory: Path = STATIC_DIR) -> dict[str, tuple[bytes, str, str]]:
    """URL path → (bytes, content type, ETag) for every shipped asset; "/" is index.html."""
    assets: dict[str, tuple[bytes, str, str]] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.suffix in CONTENT_TYPES:
            data = path.read_bytes()
            url = "/" + path.relative_to(directory).as_posix()
            assets[url] = (data, CONTENT_TYPES[path.suffix], '"' + hashlib.sha256(data).hexdigest()[:32] + '"')
    if "/index.html" not in assets:
        raise ConfigError(f"console assets missing: no index.html in {directory}")
    assets["/"] = assets["/index.html"]
    return assets


def json_response(status: int, payload: Any, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, json.dumps(payload, ensure_ascii=False, allow_nan=False).encode(), headers=headers or [])


STORAGE_FULL_STATUS = 507   # Insufficient Storage: not 429, a retry soon does not help until space is freed


def error_response(code: str, message: str, *, status: int = 0) -> Response:
    return json_response(status or HTTP_STATUS.get(code, 500), {"error": {"code": code, "message": message}})


class ConsoleFrontend:
    def __init__(self, engine: Engine, *, listen: str, metrics: Metrics | None = None,
                 authenticate: Callable[[str], KeyScope] | None = None, tls_cert: str = "", tls_key: str = "",
                 tls_client_ca: str = "") -> None:
        self.listen = listen
        self.api = ConsoleApi(engine, metrics=metrics)
        self.sessions = Sessions(authenticate=authenticate or engine.registry.catalog.authenticate)
        self.assets = load_assets()
        self.ssl_context = _ssl_context(cert=tls_cert, key=tls_key, client_ca=tls_client_ca)
        headers = list(SECURITY_HEADERS)
        if self.ssl_context is not None:
            headers.append(("Strict-Transport-Security", "max-age=31536000"))
        self.http = HttpServer(self.handle, default_headers=headers)
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    async def start(self) -> int:
        host, _, port = self.listen.rpartition(":")
        self.port = await self.http.start(host.strip("[]"), int(port), ssl_context=self.ssl_context)
        log.info("console on %s://%s:%d/", self.scheme, host or "0.0.0.0", self.port)
        return self.port

    async def stop(self) -> None:
        await self.http.stop()

    # -- requests ---------------------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        rid = secrets.token_hex(8)
        token = REQUEST_ID.set(rid)
        try:
            if request.path.startswith("/api/"):
                return await self._api(request, rid)
            return self._asset(request)
        finally:
            REQUEST_ID.reset(token)

    def _asset(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return error_response("INVALID_ARGUMENT", "assets are read with GET")
        asset = self.assets.get(request.path)
        if asset is None:
            return Response(404, b"not found", content_type="text/plain; charset=utf-8")
        data, content_type, etag = asset
        headers = [("ETag", etag), ("Cache-Control", "no-cache")]
        if etag in request.header("if-none-match"):
            return Response(304, b"", content_type="", headers=headers)
        return Response(200, data, content_type=content_type, headers=headers)

    async def _api(self, request: Request, rid: str) -> Response:
        try:
            self._check_origin(request)
            body = self._body(request)
            if (request.method, request.path) == ("POST", "/api/login"):
                return self._login(request, body)
            session, principal = self.sessions.resolve(request.cookies().get(COOKIE, ""))
            if request.method == "POST" and not Sessions.csrf_ok(session, request.header(CSRF_HEADER)):
                raise PermissionDenied("missing or wrong CSRF token")
            if (request.method, request.path) == ("POST", "/api/logout"):
                self.sessions.logout(session.sid)
                return json_response(200, {"ok": True}, headers=[("Set-Cookie", self._cookie("", max_age=0))])
            if (request.method, request.path) == ("GET", "/api/session"):
                return json_response(200, self._session_reply(session, principal))
            route = self.api.routes.get((request.method, request.path))
            if route is None:
                return error_response("NOT_FOUND", f"no route {request.method} {request.path}")
            return json_response(200, await route(principal, request, body))
        except Exception as exc:
            known = as_client_error(exc)   # EngramError as is; a full disk from any layer -> StorageFull
            if known is None:
                log.exception("console %s %s failed", request.method, request.path)
                return error_response("INTERNAL", f"internal error (request id {rid})")
            code = status_code_name(known)
            log.info("console %s %s -> %s", request.method, request.path, code)
            return error_response(code, str(known), status=STORAGE_FULL_STATUS if isinstance(known, StorageFull) else 0)

    def _check_origin(self, request: Request) -> None:
        """Same origin only: a browser's cross-site fetch is refused, and every POST must carry our Origin."""
        site = request.header("sec-fetch-site")
        if site and site != "same-origin":
            raise PermissionDenied("cross-site requests are refused")
        if request.method == "POST":
            expected = f"{self.scheme}://{request.header('host')}"
            if request.header("origin") != expected:
                raise PermissionDenied("state-changing requests must come from the console's own origin")
            if request.header("content-type").split(";")[0].strip().lower() != "application/json":
                raise InvalidArgument("POST bodies are application/json")

    @staticmethod
    def _body(request: Request) -> dict[str, Any]:
        if request.method != "POST" or not request.body:
            return {}
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError):
            raise InvalidArgument("the body is not valid JSON") from None
        if not isinstance(body, dict):
            raise InvalidArgument("the body must be a JSON object")
        return body

    def _login(self, request: Request, body: dict[str, Any]) -> Response:
        key = body.get("key")
        session, principal = self.sessions.login(key if isinstance(key, str) else "", remote=request.remote)
        log.info("console login: key %s (%s)", principal.key_id, principal.name)
        return json_response(200, self._session_reply(session, principal),
                             headers=[("Set-Cookie", self._cookie(session.sid, max_age=int(self.sessions.max_age_s)))])

    @staticmethod
    def _session_reply(session: Session, principal: KeyScope) -> dict[str, Any]:
        return {"csrf": session.csrf, "principal": to_json(principal)}

    def _cookie(self, value: str, *, max_age: int) -> str:
        secure = "; Secure" if self.ssl_context is not None else ""
        return f"{COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"


def _ssl_context(*, cert: str, key: str, client_ca: str) -> ssl.SSLContext | None:
    """HTTPS with the gRPC server's certificate when ``tls_cert`` is set; client certificates when ``tls_client_ca``."""
    if not cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
        if client_ca:
            context.load_verify_locations(client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"console: cannot load TLS files: {exc}") from None
    return context
