"""Test support: an in-process engram server on port 0 and a small client for it."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from models.base import Embedder, Reranker
from server.app import App, build_app
from server.config import load_config
from server.index.tiers import TierRules
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc

ADMIN_KEY = "test-admin-key-0123456789abcdef"


@dataclass
class RunningServer:
    """An App serving on 127.0.0.1:<free port> from its own event loop thread."""

    app: App
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    data_dir: Path
    channels: list[grpc.Channel] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.app.port}"

    def call(self, coro: Any, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def client(self, key: str = ADMIN_KEY) -> Client:
        channel = grpc.insecure_channel(self.address)
        self.channels.append(channel)
        return Client(channel, key)

    def reset(self) -> None:
        """Back to a fresh server's state between tests that share it (a module-scoped server): every
        tenant is deleted through the engine (store, indexes, audit, caches, queues), client channels close."""
        for channel in self.channels:
            channel.close()
        self.channels.clear()
        engine = self.app.engine
        admin = engine.registry.catalog.authenticate(ADMIN_KEY)

        async def drop_all() -> None:
            for tenant_id in engine.list_tenants(admin):
                await engine.delete_tenant(admin, tenant_id)

        self.call(drop_all())

    def stop(self) -> None:
        for channel in self.channels:
            channel.close()
        self.call(self.app.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


def start_server(data_dir: Path, *, embedder: Embedder, reranker: Reranker | None = None,
                 rules: TierRules | None = None, evict_idle_s: float | None = None,
                 access_top_hits: int | None = None, toml_path: Path | None = None,
                 **overrides: Any) -> RunningServer:
    """``overrides``: config options by section (over ``toml_path``, a config file, when given); ``rules`` (index
    tiers), ``evict_idle_s`` (the registry's idle grace) and ``access_top_hits`` (hits of a search that count as
    uses) set internal constants of the components for this server, not config."""
    # No reranker unless a test hands one in or names one (the bundled engram-reranker-v1 is a default).
    # Lucene commits every 0.5 s unless the test sets it (by its advanced name or its former one).
    commit = {} if "lucene_commit_interval_s" in overrides else {"lucene_commit_interval_s": 0.5}
    overrides = {**overrides, "models": {"reranker": "", **overrides.get("models", {})},
                 "advanced": {**commit, **overrides.get("advanced", {})}}
    config = load_config(env={}, toml_path=toml_path, overrides={"listen": "127.0.0.1:0", "data_dir": data_dir,
                                                                 "admin_key": ADMIN_KEY, **overrides})
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="engram-test-loop", daemon=True)
    thread.start()

    async def build() -> App:
        app = build_app(config, embedder=embedder, reranker=reranker, rules=rules)
        if evict_idle_s is not None:
            app.engine.registry.evict_idle_s = evict_idle_s
        if access_top_hits is not None:
            app.engine.recall.access_top_hits = access_top_hits
        await app.start()
        return app

    app = asyncio.run_coroutine_threadsafe(build(), loop).result(120)
    return RunningServer(app=app, loop=loop, thread=thread, data_dir=data_dir)


class Client:
    """Thin sync client over the generated stubs, with the bearer key attached."""

    def __init__(self, channel: grpc.Channel, key: str) -> None:
        self.memory = sgrpc.MemoryServiceStub(channel)
        self.admin = sgrpc.AdminServiceStub(channel)
        self.metadata = [("authorization", f"Bearer {key}")] if key else []

    def create_tenant(self, tenant_id: str, initial: list[pb.MemoryInput] | None = None) -> spb.CreateTenantResponse:
        return self.admin.CreateTenant(spb.CreateTenantRequest(tenant_id=tenant_id, initial_memories=initial or []),
                                       metadata=self.metadata)

    def create_key(self, *, tenant_ids: list[str] = (), prefixes: list[str] = (), admin: bool = False) -> str:
        reply = self.admin.CreateKey(spb.CreateKeyRequest(name="test", tenant_ids=list(tenant_ids),
                                                          tenant_prefixes=list(prefixes), admin=admin),
                                     metadata=self.metadata)
        return reply.secret

    def write(self, tenant_id: str, *memories: pb.MemoryInput | str, **common: Any) -> spb.WriteResponse:
        items = [m if isinstance(m, pb.MemoryInput) else pb.MemoryInput(content=m, **common) for m in memories]
        return self.memory.Write(spb.WriteRequest(tenant_id=tenant_id, memories=items), metadata=self.metadata)

    def search(self, tenant_id: str, text: str, **query: Any) -> pb.QueryResult:
        reply = self.memory.Search(spb.SearchRequest(tenant_id=tenant_id, queries=[pb.SearchQuery(text=text, **query)]),
                                   metadata=self.metadata)
        return reply.results[0]

    def contents(self, tenant_id: str, text: str, **query: Any) -> list[str]:
        return [h.memory.content for h in self.search(tenant_id, text, **query).hits]

    def list_all(self, tenant_id: str, **flt: Any) -> list[pb.Memory]:
        out: list[pb.Memory] = []
        token = ""
        while True:
            reply = self.memory.List(spb.ListRequest(tenant_id=tenant_id, page_size=50, page_token=token,
                                                     filter=pb.Filter(**flt)), metadata=self.metadata)
            out.extend(reply.memories)
            token = reply.next_page_token
            if not token:
                return out

    def get(self, tenant_id: str, *ids: str) -> spb.GetResponse:
        return self.memory.Get(spb.GetRequest(tenant_id=tenant_id, memory_ids=list(ids)), metadata=self.metadata)

    def delete(self, tenant_id: str, *ids: str) -> spb.DeleteResponse:
        return self.memory.Delete(spb.DeleteRequest(tenant_id=tenant_id, memory_ids=list(ids)), metadata=self.metadata)


def status_of(call: Any) -> grpc.StatusCode:
    """Runs ``call`` and returns the status code it failed with (OK if it did not fail)."""
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK
