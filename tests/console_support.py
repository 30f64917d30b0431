"""Test support for the console: a small HTTP client that behaves like the console page (session cookie,
CSRF header, the console's own Origin), and the seed data both console test modules use."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from memory_support import mem, write_one
from support import RunningServer, start_server

from engram_proto.v1 import service_pb2 as spb

XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> Alice\'s "tag" & more'


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    set_cookie: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)


class ConsoleHttp:
    """Speaks to the console like its page does: cookie kept, CSRF token from login sent on every POST."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.origin = f"http://127.0.0.1:{port}"
        self.cookie = ""
        self.csrf = ""

    def request(self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
                params: dict[str, Any] | None = None) -> Reply:
        if params:
            path += "?" + urlencode({k: v for k, v in params.items() if v is not None}, doseq=True)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = {"Cookie": self.cookie} if self.cookie else {}
            conn.request(method, path, body=body, headers={**sent, **(headers or {})})
            response = conn.getresponse()
            data = response.read()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data,
                         response.headers.get_all("Set-Cookie") or [])
        finally:
            conn.close()

    def get(self, path: str, **params: Any) -> Reply:
        return self.request("GET", path, params=params)

    def post(self, path: str, payload: dict[str, Any], *, csrf: str | None = None, origin: str | None = None,
             content_type: str = "application/json") -> Reply:
        headers = {"Content-Type": content_type, "Origin": self.origin if origin is None else origin,
                   "X-CSRF-Token": self.csrf if csrf is None else csrf}
        return self.request("POST", path, body=json.dumps(payload).encode(), headers={k: v for k, v in headers.items() if v})

    def login(self, key: str) -> Reply:
        reply = self.post("/api/login", {"key": key})
        if reply.status == 200:
            self.cookie = reply.set_cookie[0].split(";")[0]
            self.csrf = reply.json()["csrf"]
        return reply


def create_key(admin: Any, **scope: Any) -> tuple[str, str]:
    reply = admin.admin.CreateKey(spb.CreateKeyRequest(name="console-test", **scope), metadata=admin.metadata)
    return reply.key_id, reply.secret


@dataclass
class Seeded:
    alice_key: str
    alice_key_id: str
    pending_id: str
    old_city_id: str
    new_city_id: str
    xss_id: str
    beta_secret: str


def seed(admin: Any) -> Seeded:
    """acme/alice with memories of every kind (a supersede chain, a pending one, a hostile one) and beta/bob."""
    admin.create_tenant("acme/alice")
    admin.create_tenant("beta/bob")
    t = "acme/alice"
    admin.write(t, mem("Alice is allergic to peanuts", type=2, importance=0.9, entities=["alice"], pinned=True,
                       source_ref="chat-1#2"))
    admin.write(t, mem("Alice prefers short answers with bullet points", type=2, source_ref="chat-3#1"))
    admin.write(t, mem("Alice asked for flight snack ideas", type=1, entities=["alice"], source_ref="chat-13#1"))
    admin.write(t, mem("To book a table, call the restaurant before noon", type=3))
    old_city = write_one(admin, t, "Alice lives in Porto", key="city", entities=["alice"], source_ref="chat-2#5")
    new_city = write_one(admin, t, "Alice moved to Lisbon in March", key="city", entities=["alice"],
                         source_ref="chat-12#4")
    pending = write_one(admin, t, "Alice might be vegetarian now", confidence=0.2, source_ref="chat-14#2")
    xss = write_one(admin, t, XSS, source_ref="chat-<b>15</b>#1", entities=["<i>x</i>"])
    admin.write("beta/bob", mem("Bob's secret launch code is 4242", source_ref="beta-chat-1"))
    key_id, secret = create_key(admin, tenant_ids=["acme/alice"])
    _, beta_secret = create_key(admin, tenant_ids=["beta/bob"])
    return Seeded(alice_key=secret, alice_key_id=key_id, pending_id=pending.memory_id, old_city_id=old_city.memory_id,
                  new_city_id=new_city.memory_id, xss_id=xss.memory_id, beta_secret=beta_secret)


def module_fixtures() -> tuple[Any, Any]:
    """The console modules' ``running`` (one server with the console on a free port) and ``seeded`` fixtures,
    module-scoped: ``running, seeded = module_fixtures()``."""

    @pytest.fixture(scope="module")
    def running(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder: Any) -> Iterator[RunningServer]:
        server = start_server(tmp_path_factory.mktemp("console") / "data", embedder=embedder,
                              console_listen="127.0.0.1:0")
        yield server
        server.stop()

    @pytest.fixture(scope="module")
    def seeded(running: RunningServer) -> Seeded:
        return seed(running.client())

    return running, seeded
