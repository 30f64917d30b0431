"""The console's JSON routes. Each one is the engine method a gRPC servicer calls for the same question,
with the session's key as the principal: the engine authorizes the tenant and writes the audit log, so
the console can see and do exactly what that key can over gRPC, no more. No route touches a store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from server.console import codec
from server.console.plots import recency_curves, stage_latencies
from server.console.summary import summarize
from server.domain import AuditOp, Filter, KeyScope, Memory, MemoryStatus
from server.engine.engine import Engine
from server.errors import PermissionDenied
from server.metrics import STAGES, Metrics

SEARCH_TIMEOUT_S = 30.0
SCAN_LIMIT = 20_000             # memories a tenant summary reads at most (by id); beyond, "complete": false
MEMORY_AUDIT_LIMIT = 1000       # audit entries shown on one memory's page
Route = Callable[[KeyScope, Any, dict[str, Any]], Awaitable[Any]]


class ConsoleApi:
    def __init__(self, engine: Engine, *, metrics: Metrics | None) -> None:
        self.engine = engine
        self.metrics = metrics
        self.routes: dict[tuple[str, str], Route] = {
            ("GET", "/api/info"): self.info,
            ("GET", "/api/tenants"): self.tenants,
            ("GET", "/api/tenant"): self.tenant,
            ("GET", "/api/memories"): self.memories,
            ("GET", "/api/memory"): self.memory,
            ("GET", "/api/audit"): self.audit,
            ("GET", "/api/plots/recency"): self.recency,
            ("GET", "/api/plots/stages"): self.stages,
            ("POST", "/api/search"): self.search,
            ("POST", "/api/confirm"): self.confirm,
            ("POST", "/api/delete"): self.delete,
            ("POST", "/api/forget"): self.forget,
        }

    # -- reads ------------------------------------------------------------------------------------------
    async def info(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        info = self.engine.info()
        return {"principal": codec.to_json(principal), **codec.to_json(info),
                "audit_ops": [op.name for op in AuditOp], "statuses": [s.name for s in MemoryStatus],
                "breakdown_fields": codec.breakdown_fields()}

    def _stats(self, principal: KeyScope, tenant_id: str = "") -> tuple[dict[str, Any], str]:
        """Stats is an admin RPC: for other keys the console says so instead of showing tiers and memory use."""
        try:
            stats = self.engine.stats(principal, tenant_id)
        except PermissionDenied:
            return {}, "index tier and memory use come from Stats, an admin call: log in with an admin key to see them"
        return {t["tenant_id"]: codec.to_json(t) for t in stats["tenants"]}, ""

    async def tenants(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        stats, note = self._stats(principal)
        return {"tenants": [{"tenant_id": t, "stats": stats.get(t)} for t in self.engine.list_tenants(principal)],
                "stats_note": note}

    async def _scan(self, principal: KeyScope, tenant_id: str, *, limit: int) -> tuple[list[Memory], bool]:
        """Every memory of the tenant (any status) through List pages, up to ``limit``; True when complete."""
        out: list[Memory] = []
        token = ""
        page_size = self.engine.config.limits.max_page_size
        while len(out) < limit:
            page = await self.engine.list_memories(principal, tenant_id, flt=Filter(), page_size=page_size,
                                                   page_token=token)
            out.extend(page.memories)
            token = page.next_token
            if not token:
                return out, True
            await asyncio.sleep(0)   # let gRPC calls in between pages
        return out[:limit], False

    async def tenant(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        tenant_id = request.param("tenant")
        memories, complete = await self._scan(principal, tenant_id, limit=SCAN_LIMIT)
        stats, note = self._stats(principal, tenant_id)
        return {"tenant_id": tenant_id, "complete": complete, "scan_limit": SCAN_LIMIT, **summarize(memories),
                "stats": stats.get(tenant_id), "stats_note": note}

    async def memories(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        flt = codec.filter_from_json(codec.filter_from_params(request.query))
        page = await self.engine.list_memories(principal, request.param("tenant"), flt=flt,
                                               page_size=codec.integer(request.param("page_size"), "page_size", 50),
                                               page_token=request.param("page_token"))
        return {"memories": codec.to_json(page.memories), "next_page_token": page.next_token}

    async def memory(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        tenant_id, memory_id = request.param("tenant"), request.param("id")
        found, missing = await self.engine.get(principal, tenant_id, [memory_id])
        if missing:
            return {"memory": None, "missing": missing}
        versions, latest = await self.engine.history(principal, tenant_id, memory_id)
        entries, token = await self.engine.audit(principal, tenant_id, page_size=MEMORY_AUDIT_LIMIT, page_token="",
                                                 ops=frozenset(), memory_id=memory_id)
        return {"memory": codec.to_json(found[0]), "history": {"versions": codec.to_json(versions), "latest_id": latest},
                "audit": codec.to_json(entries), "audit_more": bool(token)}

    async def audit(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        entries, token = await self.engine.audit(
            principal, request.param("tenant"), page_size=codec.integer(request.param("page_size"), "page_size", 100),
            page_token=request.param("page_token"), ops=codec.audit_ops(request.params("op")),
            memory_id=request.param("memory"))
        return {"entries": codec.to_json(entries), "next_page_token": token}

    async def recency(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        return recency_curves(self.engine.config.scoring)

    async def stages(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        return stage_latencies(self.metrics.recent if self.metrics is not None else ())

    # -- the playground ----------------------------------------------------------------------------------
    async def search(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        query = codec.query_from_json(body)
        deadline_ns = time.monotonic_ns() + int(SEARCH_TIMEOUT_S * 1e9)
        started = time.monotonic_ns()
        [result] = await self.engine.search(principal, str(body.get("tenant", "")), [query], deadline_ns=deadline_ns)
        if self.metrics is not None:   # the server's own metrics count the console's searches as well
            self.metrics.query_done({s: int(getattr(result.timings, f"{s}_ns", 0)) for s in STAGES},
                                    batch_size=result.timings.batch_size)
        return {"hits": codec.to_json(result.hits), "breakdown_fields": codec.breakdown_fields(),
                "context_block": result.context_block, "timings": codec.to_json(result.timings),
                "elapsed_ms": round((time.monotonic_ns() - started) / 1e6, 2)}

    # -- changes (each one audited by the engine under the session's key) -----------------------------------
    async def confirm(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        done = await self.engine.confirm(principal, str(body.get("tenant", "")), codec.memory_ids(body))
        return {"results": [{"memory": codec.to_json(m), "superseded": list(s)} for m, s in done]}

    async def delete(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        deleted, missing = await self.engine.delete(principal, str(body.get("tenant", "")), codec.memory_ids(body))
        return {"deleted": deleted, "missing": missing}

    async def forget(self, principal: KeyScope, request: Any, body: dict[str, Any]) -> Any:
        count, ids = await self.engine.forget(principal, str(body.get("tenant", "")), codec.forget_from_json(body))
        return {"count": count, "memory_ids": ids, "dry_run": bool(body.get("dry_run"))}

