"""Every Prometheus metric engram exports, declared here and nowhere else.

RPC metrics follow the names of go-grpc-prometheus (``grpc_server_*`` with ``grpc_service``,
``grpc_method``, ``grpc_code``), so existing gRPC dashboards and alerts work unchanged; engram's own are
``engram_*``. No label ever carries a tenant id: label values come from fixed sets (RPC names, status
codes, stage names, batcher names). Each App owns its own registry (no process-global state), and the
endpoint is off unless ``metrics_listen`` is set.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

# -- names (the one list) -----------------------------------------------------------------------------
RPC_STARTED = "grpc_server_started"          # counter → grpc_server_started_total
RPC_HANDLED = "grpc_server_handled"          # counter → grpc_server_handled_total; errors: grpc_code != "OK"
RPC_SECONDS = "grpc_server_handling_seconds"
STAGE_SECONDS = "engram_search_stage_seconds"
QUERY_BATCH_SIZE = "engram_search_batch_size"
QUERIES = "engram_search_queries"            # counter → engram_search_queries_total
QUEUE_DEPTH = "engram_queue_depth"
QUEUE_CAPACITY = "engram_queue_capacity"
BATCHES = "engram_batches_total"
BATCH_ITEMS = "engram_batch_items_total"
BATCH_DROPPED = "engram_batch_dropped_total"
BATCH_REJECTED = "engram_batch_rejected_total"
TENANTS_LOADED = "engram_tenants_loaded"
STORAGE_FREE = "engram_storage_free_bytes"
STORAGE_MIN_FREE = "engram_storage_min_free_bytes"
STORAGE_LOW = "engram_storage_low"                       # 1 while writes are refused (below the watermark)
STORAGE_REFUSED = "engram_storage_writes_refused"        # counter → _total
STORAGE_FULL_EVENTS = "engram_storage_full_events"       # counter → _total: ENOSPC / EDQUOT met
LOG_BYTES = "engram_storage_log_bytes"                   # every tenant's memory log (no tenant label)
LOG_BYTES_MAX = "engram_storage_log_bytes_max"           # the largest single tenant's log
AUDIT_BYTES = "engram_storage_audit_bytes"
COMPACTIONS = "engram_compactions"                       # counter → _total
RERANK_TARGET = "engram_rerank_latency_target_seconds"   # search.latency_target_ms (0: the controller is off)
RERANK_DEPTH = "engram_rerank_depth"                     # the depth the controller gave the last batch
RERANK_DEPTH_FULL = "engram_rerank_depth_full"           # the default depth it starts from
RERANK_PAIR_SECONDS = "engram_rerank_pair_seconds"       # its cost model: seconds per (query, candidate) pair
RERANK_BATCHES = "engram_rerank_batches"                 # counter → _total, by depth: full | reduced | skipped
RERANK_PAIR_SECONDS_WIDE = "engram_rerank_pair_seconds_wide"   # the same, of passes alone on the idle cores
RERANK_BATCHES_WIDE = "engram_rerank_batches_wide"       # counter → _total: batches whose pass ran on them
RERANK_LOAD_SCALE = "engram_rerank_load_scale"           # the observed tail's feedback on the budget under load
RERANK_TAIL_P95 = "engram_rerank_tail_p95_seconds"       # the p95 that feedback reads
LINK_REVIEWS = "engram_link_reviews"                     # counter → _total, by outcome (hygiene/link_review.py)
LINK_REVIEWS_QUEUED = "engram_link_reviews_queued"       # new statements waiting for the model's review
GC_COLLECTIONS = "engram_gc_collections"                 # counter → _total, by generation (server/gcpauses.py)
GC_PAUSE_SECONDS = "engram_gc_pause_seconds"             # counter → _total: time the process stood still in them
GC_PAUSE_LONGEST = "engram_gc_pause_longest_seconds"     # the longest single collection, by generation
GC_FROZEN = "engram_gc_frozen_objects"                   # objects out of the collector's reach (tenants.gc_tuning)
# The Ray edge's view of its TenantShard replicas (server/cluster/board.py), per replica (replica, node_id labels)
CLUSTER_REPLICAS = "engram_cluster_replicas"             # replicas that reported in the last interval
CLUSTER_REPLICA_USED = "engram_cluster_replica_used_bytes"
CLUSTER_REPLICA_RSS = "engram_cluster_replica_rss_bytes"
CLUSTER_REPLICA_DISK = "engram_cluster_replica_disk_bytes"
CLUSTER_REPLICA_LOADED = "engram_cluster_replica_loaded_tenants"
# The Ray edge's tenant calls by path (server/cluster/board.py HopCollector), by method (and outcome)
CLUSTER_DIRECT_CALLS = "engram_cluster_direct_calls"     # counter → _total: outcome answered | refused | failed
CLUSTER_SERVE_CALLS = "engram_cluster_serve_calls"       # counter → _total: through Ray Serve

STAGES = ("queue", "embed", "ann", "bm25", "fusion", "rerank", "decay", "total")
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
RECENT_QUERIES = 256   # per-query stage timings kept for the console's latency plot (not exported)


class BatcherView(Protocol):
    """What the metrics read from a batcher at scrape time."""

    name: str
    capacity: int

    @property
    def depth(self) -> int: ...

    @property
    def stats(self) -> Any: ...  # .batches, .items, .dropped, .rejected


def split_method(path: str) -> tuple[str, str]:
    """``/engram.v1.MemoryService/Search`` → (``engram.v1.MemoryService``, ``Search``)."""
    _, _, rest = path.partition("/")
    service, _, method = rest.partition("/")
    return service or "unknown", method or "unknown"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        rpc = ("grpc_type", "grpc_service", "grpc_method")
        self.started = Counter(RPC_STARTED, "RPCs started on the server.", rpc, registry=self.registry)
        self.handled = Counter(RPC_HANDLED, "RPCs completed on the server, by status code.", (*rpc, "grpc_code"),
                               registry=self.registry)
        self.seconds = Histogram(RPC_SECONDS, "Time from receiving an RPC to its status, in seconds.", rpc,
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.stage = Histogram(STAGE_SECONDS, "Per-query time in each search stage (shared stages: the batch's).",
                               ("stage",), buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.batch_size = Histogram(QUERY_BATCH_SIZE, "Queries in the device batch each search query rode in.",
                                    buckets=BATCH_BUCKETS, registry=self.registry)
        self.queries = Counter(QUERIES, "Search queries answered (a Search RPC may carry several).",
                               registry=self.registry)
        # (unix ms, stage → ns, batch size) of the last RECENT_QUERIES queries, oldest first
        self.recent: deque[tuple[int, dict[str, int], int]] = deque(maxlen=RECENT_QUERIES)
        self._http: Any = None
        self._http_thread: threading.Thread | None = None

    # -- observations (edge) -----------------------------------------------------------------------------
    def rpc_started(self, path: str) -> None:
        service, method = split_method(path)
        self.started.labels("unary", service, method).inc()

    def rpc_done(self, path: str, code: str, seconds: float) -> None:
        service, method = split_method(path)
        self.handled.labels("unary", service, method, code).inc()
        self.seconds.labels("unary", service, method).observe(seconds)

    def query_done(self, stages_ns: Mapping[str, int], *, batch_size: int) -> None:
        self.queries.inc()
        for stage in STAGES:
            value = stages_ns.get(stage, 0)
            if value > 0 or stage in ("queue", "total"):
                self.stage.labels(stage).observe(value / 1e9)
        if batch_size > 0:
            self.batch_size.observe(batch_size)
        self.recent.append((int(time.time() * 1000), dict(stages_ns), batch_size))

    # -- state read at scrape time -----------------------------------------------------------------------
    def watch(self, *, batchers: Sequence[BatcherView], loaded_tenants: Callable[[], int],
              storage: Callable[[], Mapping[str, Any]] | None = None, rerank: Callable[[], Any] | None = None,
              gc_pauses: Callable[[], Mapping[str, Any]] | None = None,
              link_reviews: Any | None = None) -> None:
        self.registry.register(_StateCollector(batchers, loaded_tenants))
        if link_reviews is not None:
            self.registry.register(_LinkReviewCollector(link_reviews))
        if gc_pauses is not None:
            self.registry.register(_GcCollector(gc_pauses))
        if storage is not None:
            self.registry.register(_StorageCollector(storage))
        if rerank is not None:
            self.registry.register(_RerankCollector(rerank))

    # -- the endpoint ------------------------------------------------------------------------------------
    def serve(self, listen: str) -> int:
        """Starts ``/metrics`` on host:port (port 0: any free one); returns the bound port."""
        host, _, port = listen.rpartition(":")
        self._http, self._http_thread = start_http_server(int(port), addr=host.strip("[]") or "0.0.0.0",
                                                          registry=self.registry)
        bound = int(self._http.server_port)
        log.info("metrics on http://%s:%d/metrics", host or "0.0.0.0", bound)
        return bound

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._http_thread is not None:
            self._http_thread.join(5)
            self._http_thread = None


class _StateCollector(Collector):
    def __init__(self, batchers: Sequence[BatcherView], loaded_tenants: Callable[[], int]) -> None:
        self._batchers = list(batchers)
        self._loaded_tenants = loaded_tenants

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(QUEUE_DEPTH, "Requests waiting in a batcher's queue.", labels=["batcher"])
        capacity = GaugeMetricFamily(QUEUE_CAPACITY, "A batcher's queue capacity.", labels=["batcher"])
        batches = CounterMetricFamily(BATCHES, "Batches run.", labels=["batcher"])
        items = CounterMetricFamily(BATCH_ITEMS, "Requests run in batches.", labels=["batcher"])
        dropped = CounterMetricFamily(BATCH_DROPPED, "Requests dropped: deadline passed while queued.",
                                      labels=["batcher"])
        rejected = CounterMetricFamily(BATCH_REJECTED, "Requests refused: queue full (RESOURCE_EXHAUSTED).",
                                       labels=["batcher"])
        for b in self._batchers:
            stats = b.stats
            depth.add_metric([b.name], b.depth)
            capacity.add_metric([b.name], b.capacity)
            batches.add_metric([b.name], stats.batches)
            items.add_metric([b.name], stats.items)
            dropped.add_metric([b.name], stats.dropped)
            rejected.add_metric([b.name], stats.rejected)
        yield from (depth, capacity, batches, items, dropped, rejected)
        yield GaugeMetricFamily(TENANTS_LOADED, "Tenant shards loaded in memory.", value=self._loaded_tenants())


class _RerankCollector(Collector):
    """The rerank-depth controller's state (``RerankController.state``) at scrape time."""

    def __init__(self, state: Callable[[], Any]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        s = self._state()
        yield GaugeMetricFamily(RERANK_TARGET, "The latency target the rerank depth is chosen for (0: off).",
                                value=s.target_ms / 1000.0)
        yield GaugeMetricFamily(RERANK_DEPTH, "The rerank depth the last search batch ran at.", value=s.depth)
        yield GaugeMetricFamily(RERANK_DEPTH_FULL, "The default rerank depth (when idle).", value=s.full_depth)
        yield GaugeMetricFamily(RERANK_PAIR_SECONDS, "Measured cross-encoder seconds per pair, smoothed.",
                                value=s.ms_per_pair / 1000.0)
        yield GaugeMetricFamily(RERANK_PAIR_SECONDS_WIDE, "Measured seconds per pair of a cross-encoder pass that ran "
                                "alone on the idle cores, smoothed (0: not measured).", value=s.ms_per_pair_wide / 1000.0)
        batches = CounterMetricFamily(RERANK_BATCHES, "Search batches by the rerank depth chosen.", labels=["depth"])
        for label, value in (("full", s.batches_full), ("reduced", s.batches_reduced), ("skipped", s.batches_skipped)):
            batches.add_metric([label], value)
        yield batches
        yield GaugeMetricFamily(RERANK_LOAD_SCALE, "The share of its budget a search batch under load may rerank "
                                "with: cut while the observed p95 is over the target.", value=s.load_scale)
        yield GaugeMetricFamily(RERANK_TAIL_P95, "p95 of the last default-depth searches' latencies, arrival to "
                                "answer (0: too few yet).", value=s.tail_p95_ms / 1000.0)
        yield CounterMetricFamily(RERANK_BATCHES_WIDE, "Search batches whose cross-encoder pass ran alone on the idle "
                                  "cores.", value=s.batches_wide)


class _LinkReviewCollector(Collector):
    """The extractor's review of update links (a ``LinkReviewer``'s stats and queue) at scrape time."""

    OUTCOMES = ("confirmed", "made", "removed", "refused", "failed", "dropped")

    def __init__(self, reviewer: Any) -> None:
        self._reviewer = reviewer

    def collect(self) -> Iterator[Metric]:
        s = self._reviewer.stats
        reviews = CounterMetricFamily(LINK_REVIEWS, "New statements whose update link the extractor's model reviewed, "
                                      "by outcome: the rules' link confirmed, a link made or removed, a link named "
                                      "that could not be made, a review failed after its retries, a statement not "
                                      "queued (queue full); reviewed = answered.", labels=["outcome"])
        reviews.add_metric(["reviewed"], s.reviewed)
        for outcome in self.OUTCOMES:
            reviews.add_metric([outcome], getattr(s, outcome))
        yield reviews
        yield GaugeMetricFamily(LINK_REVIEWS_QUEUED, "New statements waiting for the extractor's review.",
                                value=self._reviewer.queued())


class _GcCollector(Collector):
    """Python's garbage collector passes (``GcPauses.snapshot``) at scrape time."""

    def __init__(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self._snapshot()
        collections = CounterMetricFamily(GC_COLLECTIONS, "Python garbage collector passes, by generation.",
                                          labels=["generation"])
        seconds = CounterMetricFamily(GC_PAUSE_SECONDS, "Seconds the process spent in garbage collector passes (the "
                                      "GIL held: every request waits), by generation.", labels=["generation"])
        longest = GaugeMetricFamily(GC_PAUSE_LONGEST, "The longest garbage collector pass, by generation.",
                                    labels=["generation"])
        for generation in range(3):
            collections.add_metric([str(generation)], s["collections"][generation])
            seconds.add_metric([str(generation)], s["seconds"][generation])
            longest.add_metric([str(generation)], s["longest_s"][generation])
        yield collections
        yield seconds
        yield longest
        yield GaugeMetricFamily(GC_FROZEN, "Objects moved out of the garbage collector's reach after tenant loads "
                                "(tenants.gc_tuning).", value=s["frozen_objects"])


class _StorageCollector(Collector):
    """Disk state at scrape time (``Engine.storage_stats``): totals and the largest tenant, never per tenant."""

    def __init__(self, storage: Callable[[], Mapping[str, Any]]) -> None:
        self._storage = storage

    def collect(self) -> Iterator[Metric]:
        d = self._storage()
        top = d.get("top_tenants") or []
        yield GaugeMetricFamily(STORAGE_FREE, "Free bytes on the data directory's filesystem.", value=d["free_bytes"])
        yield GaugeMetricFamily(STORAGE_MIN_FREE, "The free-space watermark (storage.min_free_mb) in bytes.",
                                value=d["min_free_bytes"])
        yield GaugeMetricFamily(STORAGE_LOW, "1 while free space is below the watermark: writes are refused.",
                                value=1 if d["low"] else 0)
        yield CounterMetricFamily(STORAGE_REFUSED, "Writes answered RESOURCE_EXHAUSTED storage full.",
                                  value=d["writes_refused"])
        yield CounterMetricFamily(STORAGE_FULL_EVENTS, "ENOSPC / EDQUOT met on a write path.", value=d["full_events"])
        yield GaugeMetricFamily(LOG_BYTES, "Bytes of every tenant's memory log.", value=d["log_bytes"])
        yield GaugeMetricFamily(LOG_BYTES_MAX, "Bytes of the largest tenant memory log.",
                                value=top[0]["log_bytes"] if top else 0)
        yield GaugeMetricFamily(AUDIT_BYTES, "Bytes of every tenant's audit segments.", value=d["audit_bytes"])
        yield CounterMetricFamily(COMPACTIONS, "Automatic log compactions.", value=d["compactions"])
