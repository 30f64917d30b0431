"""One view of the cluster for operators: each TenantShard replica publishes its figures to the bucket
(``system/replicas/<replica id>.json``, every ``BOARD_INTERVAL_S``), and the edge reads them back for ``/metrics``
and ``Stats``.

A replica's record: its id, process, node, when it was written, its registry stats (the tenants it has loaded,
their states and sizes), its process RSS, the bytes of its data dir (a cache) and its Prometheus exposition.
The edge sums the replicas' metric samples by name and labels (no tenant label exists to sum away; gauges that
are a maximum, ``*_longest_*`` and ``*_max``, take the largest), adds per-replica gauges labelled by replica, and
merges the registry stats: totals summed, each loaded tenant once with the replica holding it. A record older
than ``STALE_S`` is a replica that went away: left out (and deleted once ten times that old).

Nothing here is on a request's path: a replica's publication runs beside its flush, the edge reads at scrape time.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from server import metrics
from server.errors import StoreUnavailable
from server.store.s3 import ObjectStore

log = logging.getLogger(__name__)

BOARD_ROOT = "system/replicas/"
BOARD_INTERVAL_S = 5.0
STALE_S = 3 * BOARD_INTERVAL_S
REPLICA_GAUGES = {"used_bytes": metrics.CLUSTER_REPLICA_USED, "rss_bytes": metrics.CLUSTER_REPLICA_RSS,
                  "disk_bytes": metrics.CLUSTER_REPLICA_DISK, "loaded_tenants": metrics.CLUSTER_REPLICA_LOADED}


def dir_bytes(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                pass
    return total


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def publish(store: ObjectStore, record: Mapping[str, Any]) -> None:
    """A replica's record (``record["replica"]`` names it), written over its last one."""
    store.put(f"{BOARD_ROOT}{record['replica']}.json", json.dumps({**record, "at_s": time.time()}).encode())


@dataclass(frozen=True)
class Board:
    """The edge's reader of the replicas' records."""

    store: ObjectStore

    def records(self, *, now_s: float | None = None) -> list[dict[str, Any]]:
        """The live replicas' records, by replica id; stale ones left out (very old ones deleted)."""
        now_s = time.time() if now_s is None else now_s
        out = []
        for item in self.store.listing(BOARD_ROOT):
            try:
                blob = self.store.get(item.key)
            except StoreUnavailable:
                continue
            if blob is None:
                continue
            record = json.loads(blob.body)
            age = now_s - float(record.get("at_s", 0.0))
            if age > 10 * STALE_S:
                self.store.delete(item.key)
            if age <= STALE_S:
                out.append(record)
        return sorted(out, key=lambda r: str(r["replica"]))


def merge_stats(records: Sequence[Mapping[str, Any]], *, total_tenants: int, tenant_id: str = "") -> dict[str, Any]:
    """The registry stats of every replica as one (the engine's ``registry.stats`` shape): totals summed, each
    loaded tenant with ``replica`` (the one holding it; a tenant two replicas hold during a move: both)."""
    out: dict[str, Any] = {"total_tenants": total_tenants, "loaded_tenants": 0, "memory_budget_bytes": 0,
                           "used_bytes": 0, "loads": 0, "evictions": 0, "load_ms_total": 0.0, "evict_ms_total": 0.0,
                           "tenants": [], "replicas": []}
    for record in records:
        stats = record.get("stats", {})
        for name in ("loaded_tenants", "memory_budget_bytes", "used_bytes", "loads", "evictions", "load_ms_total",
                     "evict_ms_total"):
            out[name] += stats.get(name, 0)
        tenants = [{**t, "replica": record["replica"]} for t in stats.get("tenants", ())
                   if not tenant_id or t.get("tenant_id") == tenant_id]
        out["tenants"] += tenants
        out["replicas"].append({"replica": record["replica"], "node_id": record.get("node_id", ""),
                                "pid": record.get("pid", 0), "loaded_tenants": stats.get("loaded_tenants", 0),
                                "used_bytes": stats.get("used_bytes", 0), "rss_bytes": record.get("rss_bytes", 0),
                                "disk_bytes": record.get("disk_bytes", 0)})
    if tenant_id and not out["tenants"]:
        out["tenants"] = [{"tenant_id": tenant_id, "state": "UNLOADED"}]
    out["tenants"].sort(key=lambda t: (t["tenant_id"], t.get("replica", "")))
    return out


def merge_metrics(texts: Sequence[str]) -> list[Metric]:
    """The replicas' expositions as one: each sample summed over replicas by name and labels (``*_longest_*`` and
    ``*_max`` gauges: the largest)."""
    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            merged = families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            samples = values.setdefault(family.name, {})
            for s in family.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                if key in samples and ("longest" in s.name or s.name.endswith("_max")):
                    samples[key] = max(samples[key], s.value)
                else:
                    samples[key] = samples.get(key, 0.0) + s.value
    out = []
    for name, family in families.items():
        for (sample, labels), value in values[name].items():
            family.add_sample(sample, dict(labels), value)
        out.append(family)
    return out


class ReplicaCollector(Collector):
    """The edge's ``/metrics`` share of the replicas (``records``: as the edge last read them): their metrics
    merged, and per-replica gauges."""

    def __init__(self, records: Callable[[], Sequence[Mapping[str, Any]]]) -> None:
        self.records = records

    def collect(self) -> Iterator[Metric]:
        records = list(self.records())
        replicas = Metric(metrics.CLUSTER_REPLICAS, "TenantShard replicas that reported in the last interval.",
                          "gauge")
        replicas.add_sample(metrics.CLUSTER_REPLICAS, {}, float(len(records)))
        yield replicas
        for field, name in REPLICA_GAUGES.items():
            gauge = Metric(name, f"Per TenantShard replica: {field.replace('_', ' ')}.", "gauge")
            for r in records:
                value = r.get(field, r.get("stats", {}).get(field, 0))
                gauge.add_sample(name, {"replica": str(r["replica"]), "node_id": str(r.get("node_id", ""))},
                                 float(value))
            yield gauge
        yield from merge_metrics([str(r.get("metrics", "")) for r in records if r.get("metrics")])


class HopCollector(Collector):
    """The edge's own share: its tenant calls by method and path (``counts``: (method, outcome) → calls, the
    ClusterEngine's). A direct call was answered, refused (the replica does not hold the tenant: then sent
    through Serve) or failed (HopFailed: a read then goes through Serve, a change answers UNAVAILABLE); a Serve
    call is any that went through Serve. Labels: method and outcome only (never a tenant)."""

    def __init__(self, counts: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = dict(self.counts())
        direct = CounterMetricFamily(metrics.CLUSTER_DIRECT_CALLS, "Tenant calls the edge sent on the direct path, "
                                     "by method and outcome (answered, refused, failed).", labels=["method", "outcome"])
        serve = CounterMetricFamily(metrics.CLUSTER_SERVE_CALLS, "Tenant calls the edge sent through Ray Serve "
                                    "(no direct route, refused, or a read lost on the direct path), by method.",
                                    labels=["method"])
        for (method, outcome), n in sorted(counts.items()):
            if outcome == "serve":
                serve.add_metric([method], float(n))
            else:
                direct.add_metric([method, outcome], float(n))
        yield direct
        yield serve
