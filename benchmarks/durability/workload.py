"""The long-run workload, shared by ``benchmarks/durability/run.py`` and the slow long-run test: one tenant
goes through write / search / touch / delete cycles with a constant live set, so everything that grows
with operations is history, not data. ``measure`` reads what a restart costs now (the shard evicted and
reloaded from its files, as a server start would), the log and audit bytes and the process RSS."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.store.audit import audit_bytes

TOPICS = ("walnut harbor", "cobalt river", "saffron meadow", "quartz lantern", "violin orbit", "maple glacier")


@dataclass
class Cycle:
    writes: int = 10            # memories written per cycle (one Write)
    searches: int = 20          # live searches (their first hits count as uses: access records)
    touches: int = 10           # Touch RPCs, each naming `touch_ids` memories
    touch_ids: int = 40
    live: int = 60              # the oldest beyond this are deleted every cycle
    lexical_searches: bool = True   # compress time: no embedding per search (the access and audit paths are the same)


@dataclass
class Run:
    tenant: str
    ids: list[str] = field(default_factory=list)
    operations: int = 0
    n: int = 0


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cycle(client: Any, run: Run, spec: Cycle) -> None:
    contents = [f"note {run.n + i} about the {TOPICS[(run.n + i) % len(TOPICS)]} and item{run.n + i}"
                for i in range(spec.writes)]
    run.n += spec.writes
    reply = client.memory.Write(spb.WriteRequest(tenant_id=run.tenant,
                                                 memories=[pb.MemoryInput(content=c) for c in contents]),
                                metadata=client.metadata)
    run.ids.extend(r.memory_id for r in reply.results)
    for i in range(spec.searches):
        client.memory.Search(spb.SearchRequest(tenant_id=run.tenant, queries=[pb.SearchQuery(
            text=TOPICS[i % len(TOPICS)], top_k=10, lexical_only=spec.lexical_searches)]), metadata=client.metadata)
    for i in range(spec.touches):
        start = (i * spec.touch_ids) % max(1, len(run.ids))
        ids = (run.ids[start:] + run.ids[:start])[:spec.touch_ids]
        client.memory.Touch(spb.TouchRequest(tenant_id=run.tenant, memory_ids=ids), metadata=client.metadata)
    doomed = run.ids[:-spec.live] if len(run.ids) > spec.live else []
    if doomed:
        client.memory.Delete(spb.DeleteRequest(tenant_id=run.tenant, memory_ids=doomed), metadata=client.metadata)
        run.ids = run.ids[-spec.live:]
    run.operations += spec.writes + spec.searches + spec.touches * spec.touch_ids + len(doomed)


def measure(app: Any, run: Run) -> dict[str, float]:
    """Log and audit bytes, RSS, and the restart time of the tenant (evict, then load from its files)."""
    registry = app.engine.registry
    directory = registry.directory(run.tenant)
    app.engine.flush()   # what the periodic flush would have done by now (touches, Lucene commit, maintenance)
    _wait_compactions(registry)
    log_bytes = (directory / "memories.wal").stat().st_size
    registry.evict(run.tenant)
    started = time.perf_counter()
    registry.shard(run.tenant)
    restart_ms = (time.perf_counter() - started) * 1000.0
    return {"operations": run.operations, "log_bytes": log_bytes, "audit_bytes": audit_bytes(directory),
            "restart_ms": restart_ms, "rss_bytes": rss_bytes()}


def _wait_compactions(registry: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while registry.compactions_running() and time.monotonic() < deadline:
        time.sleep(0.02)
