"""Reading option values and the names of the previous release: ``coerce`` turns a string (an environment
variable) into an option's type; RENAMED options still take effect under their new name, REMOVED ones (internal
knobs that became constants beside their code) are ignored, each with a warning, for one release. ADVANCED options
are what the server measures or derives itself: out of the option table, set (rarely) in the ``[advanced]`` table
or as ``ENGRAM_ADVANCED__NAME``; their former names still take effect, with a warning
(docs/reference/options-removed.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from server.errors import ConfigError

log = logging.getLogger("server.config")


def coerce(value: str, current: Any) -> Any:
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


# Options of the previous release, accepted for one more with a warning (then unknown). RENAMED still take
# effect: old name → (new name, old value → new value; None leaves the new option as it is).
RENAMED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "batching.enabled": ("batching.max_batch_requests", lambda on: None if coerce(str(on), True) else 1),
}
# REMOVED were internal knobs: each is now a constant beside the code that uses it, with the measurement that
# chose it; a setting is ignored (old name → where the value lives now).
REMOVED: dict[str, str] = {
    "search.rerank_weight": "the reranked order is the calibrated relevance (README Ranking)",
    "search.rerank_rrf_k": "the reranked order is the calibrated relevance (README Ranking)",
    "models.trace": "CPU models always run as frozen TorchScript traces (server/app.py CPU_SPEED)",
    "models.unpad": "CPU models always run on packed tokens without padding (server/app.py CPU_SPEED)",
    "models.rerank_max_length": "the cross-encoder reads up to its own limit, the length its recipe trained at",
    **{f"index.{name}": "index tiers follow server/index/tiers.py TierRules, where the benchmarks chose them"
       for name in ("promote_at", "codes", "nprobe", "ef_search", "ef_construction", "regrow_factor")},
    "tenants.evict_idle_s": "server/tenants/registry.py EVICT_IDLE_S",
    "tenants.build_threads": "server/tenants/registry.py BUILD_THREADS",
    "memory.default_importance": "server/hygiene/salience.py DEFAULT_IMPORTANCE",
    "memory.salience_importance_span": "server/hygiene/salience.py SALIENCE_IMPORTANCE_SPAN (chosen on LoCoMo dev)",
    "memory.pending_below_confidence": "server/engine/write.py PENDING_BELOW_CONFIDENCE",
    "memory.consolidate_cosine": "server/hygiene/consolidate.py CONSOLIDATE_COSINE (chosen on LoCoMo dev)",
    **{f"memory.{name}": f"server/hygiene/extractor.py {name.upper()}"
       for name in ("extract_every_turns", "extract_window", "extractor_timeout_s", "extractor_retries")},
    "batching.max_batch_tokens": "server/batching/batcher.py MAX_BATCH_TOKENS",
    "batching.max_wait_ms": "server/batching/batcher.py MAX_WAIT_MS (0 with max_batch_requests = 1)",
    "batching.device_slots": "server/batching/batcher.py device_slots(), the rule its auto value was",
    "batching.query_cache_entries": "server/batching/query_cache.py QUERY_CACHE_ENTRIES",
    "batching.tenant_quantum": "server/batching/scheduler.py TENANT_QUANTUM",
    "search.default_top_k": "server/engine/ranking.py DEFAULT_TOP_K",
    **{f"search.{name}": f"server/engine/search.py {name.upper()} (chosen on the dev sets, README Retrieval quality)"
       for name in ("rrf_k", "dense_weight", "lexical_weight", "dense_weight_cjk", "dense_weight_code")},
    "search.pair_cache_entries": "server/batching/pair_cache.py PAIR_CACHE_ENTRIES",
    "search.min_relevance": "server/engine/context.py MIN_RELEVANCE; SearchQuery.min_relevance sets one per query",
    "search.feedback_weight": "server/engine/feedback.py FEEDBACK_WEIGHT",
    "search.feedback_below": "server/engine/feedback.py FEEDBACK_BELOW",
    **{f"scoring.{name}": f"server/engine/ranking.py {name.upper()} (chosen on the dev sets); the Scoring of a request "
       "sets its own" for name in ("recency_weight", "importance_weight", "decay_floor")},
    "scoring.temporal_boost": "server/engine/ranking.py TEMPORAL_BOOST",
    "memory.access_importance_step": "server/engine/ranking.py ACCESS_IMPORTANCE_STEP",
    "memory.access_importance_max": "server/engine/ranking.py ACCESS_IMPORTANCE_MAX",
    "memory.access_top_hits": "server/engine/recall.py ACCESS_TOP_HITS",
    "memory.audit_segment_mb": "server/store/audit.py AUDIT_SEGMENT_BYTES",
    "limits.max_tenant_id_len": "server/tenants/catalog.py MAX_TENANT_ID_LEN",
}
# [advanced] name → the option it sets (and its name in the main table until this release). The server decides these
# (threads from the cores, cohorts from the load, thresholds from the embedder, ...); docs/reference/options-removed.md
# says what it decides instead of each.
ADVANCED: dict[str, str] = {
    **{name: f"models.{name}" for name in ("cpu_threads", "device_threads", "idle_threads", "rerank_dtype",
                                           "embed_max_length", "passage_vectors", "passage_tokens",
                                           "turn_passage_tokens", "turn_passage_vectors", "query_adapter")},
    **{name: f"batching.{name}" for name in ("queue_capacity", "split_above", "query_cache_ttl_ms")},
    **{name: f"search.{name}" for name in ("candidates", "centre_cjk", "feedback_docs")},
    "calibration": "scoring.calibration",
    **{name: f"memory.{name}" for name in ("dedupe_cosine", "thread_window_s", "consolidate_interval_s",
                                           "audit_max_mb")},
    **{name: f"limits.{name}" for name in ("max_memories_per_write", "max_queries_per_search", "max_top_k",
                                           "max_candidates", "max_page_size", "max_query_bytes", "max_entities",
                                           "max_metadata_entries")},
    "gc_tuning": "tenants.gc_tuning",
    "compact_ratio": "storage.compact_ratio",
    "compact_min_mb": "storage.compact_min_mb",
    "access_key_env": "object_store.access_key_env",
    "secret_key_env": "object_store.secret_key_env",
    "object_store_grace_s": "object_store.grace_s",
    "object_store_timeout_s": "object_store.timeout_s",
    "object_store_attempts": "object_store.attempts",
    "ray_app_name": "cluster.app_name",
    "verify_owner_s": "cluster.verify_owner_s",
    "grace_s": "grace_s",
    "jvm_heap_mb": "jvm_heap_mb",
    "lucene_commit_interval_s": "lucene_commit_interval_s",
}
_ABSENT = object()


def lift_advanced(layered: Mapping[str, Any], *, known: Callable[[str], bool] = lambda dotted: True) -> dict[str, Any]:
    """``layered`` with its ``[advanced]`` table put where each option lives in the config (``advanced.cpu_threads``
    → ``models.cpu_threads``; ``known(dotted)`` says whether this config has it). Setting one by its former name
    (``models.cpu_threads``, ``ENGRAM_MODELS__CPU_THREADS``) still takes effect, with a warning; the ``[advanced]``
    value wins where both are set."""
    out = {name: dict(value) if isinstance(value, Mapping) else value for name, value in layered.items()}
    table = out.pop("advanced", {})
    if not isinstance(table, Mapping):
        raise ConfigError("config section advanced needs a table")
    for name in table:
        if name not in ADVANCED or not known(ADVANCED[name]):
            raise ConfigError(f"unknown config option: advanced.{name}")
    for name, dotted in ADVANCED.items():
        section, _, key = dotted.rpartition(".")
        holder = out.get(section) if section else out
        if isinstance(holder, Mapping) and key in holder:
            log.warning("config option %s is now advanced.%s (the [advanced] table, ENGRAM_ADVANCED__%s; "
                        "docs/reference/options-removed.md): the old name goes in the next release", dotted, name,
                        name.upper())
        if name in table:
            (out.setdefault(section, {}) if section else out)[key] = table[name]
    return out


def migrate(layered: Mapping[str, Any], *, current: set[str]) -> dict[str, Any]:
    """``layered`` with deprecated options translated (RENAMED) or dropped (REMOVED), each with a warning."""
    out = {name: dict(value) if isinstance(value, Mapping) else value for name, value in layered.items()}

    def pop(dotted: str) -> Any:
        section, _, name = dotted.rpartition(".")
        table = out.get(section) if section else out
        return table.pop(name, _ABSENT) if isinstance(table, dict) else _ABSENT

    for old, (new, convert) in RENAMED.items():
        value = pop(old)
        if value is not _ABSENT:
            mapped = convert(value)
            log.warning("config option %s is deprecated and goes in the next release: set %s instead%s", old, new,
                        "" if mapped is None else f" (taken as {new} = {mapped!r})")
            if mapped is not None:
                section, _, name = new.rpartition(".")
                (out.setdefault(section, {}) if section else out)[name] = mapped
    for old, where in REMOVED.items():
        if pop(old) is not _ABSENT:
            log.warning("config option %s is no longer an option; the setting is ignored: %s", old, where)
    return {name: value for name, value in out.items() if name in current or value != {}}
