"""Checks of domain requests against the configured limits. Every failure is an InvalidArgument whose
message names the field, and nothing is changed before all checks pass."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from server.config import LimitsConfig
from server.domain import Filter, MemoryInput, SearchQuery
from server.errors import InvalidArgument

MAX_TIME_MS = 32503680000000  # year 3000
_MAX_LABEL = 256


# What _bad_chars refuses: Unicode's control characters (category Cc: U+0000-001F and U+007F-009F, a set Unicode
# never changes), surrogates (Cs) and the two noncharacters U+FFFE/U+FFFF; newlines and tabs where allowed. One regex
# search instead of a category lookup a character (tests/unit/engine/test_validation_chars.py holds them equal).
_BAD_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_BAD_CHARS_BUT_NEWLINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _bad_chars(text: str, *, allow_newlines: bool) -> bool:
    return (_BAD_CHARS_BUT_NEWLINES if allow_newlines else _BAD_CHARS).search(text) is not None


def _label(value: str, field: str, *, max_len: int = _MAX_LABEL) -> None:
    if len(value) > max_len:
        raise InvalidArgument(f"{field} is longer than {max_len} characters")
    if _bad_chars(value, allow_newlines=False):
        raise InvalidArgument(f"{field} contains control characters")


def _unit(value: float | None, field: str) -> None:
    if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InvalidArgument(f"{field} must be a number in [0, 1]")


def _time(value: int, field: str) -> None:
    if not 0 <= value <= MAX_TIME_MS:
        raise InvalidArgument(f"{field} must be a Unix time in milliseconds between 0 and year 3000")


def _labels(values: Iterable[str], field: str, *, max_count: int) -> None:
    values = list(values)
    if len(values) > max_count:
        raise InvalidArgument(f"{field} has more than {max_count} entries")
    for v in values:
        if not v:
            raise InvalidArgument(f"{field} has an empty entry")
        _label(v, field)


def validate_memory(m: MemoryInput, *, limits: LimitsConfig, where: str = "memory") -> None:
    if not m.content.strip():
        raise InvalidArgument(f"{where}.content is empty")
    if len(m.content.encode()) > limits.max_content_bytes:
        raise InvalidArgument(f"{where}.content is larger than {limits.max_content_bytes} bytes")
    if _bad_chars(m.content, allow_newlines=True):
        raise InvalidArgument(f"{where}.content contains control characters")
    if len(m.context.encode()) > limits.max_content_bytes:
        raise InvalidArgument(f"{where}.context is larger than {limits.max_content_bytes} bytes")
    if _bad_chars(m.context, allow_newlines=True):
        raise InvalidArgument(f"{where}.context contains control characters")
    _unit(m.importance, f"{where}.importance")
    _unit(m.confidence, f"{where}.confidence")
    _time(m.created_at_ms, f"{where}.created_at_ms")
    _time(m.last_access_at_ms, f"{where}.last_access_at_ms")
    _time(m.expires_at_ms, f"{where}.expires_at_ms")
    _labels(m.entities, f"{where}.entities", max_count=limits.max_entities)
    _label(m.source_ref, f"{where}.source_ref", max_len=1024)
    _label(m.scope, f"{where}.scope")
    _label(m.key, f"{where}.key")
    _labels(m.supersedes, f"{where}.supersedes", max_count=64)
    if len(m.metadata) > limits.max_metadata_entries:
        raise InvalidArgument(f"{where}.metadata has more than {limits.max_metadata_entries} entries")
    for k, v in m.metadata.items():
        if not k:
            raise InvalidArgument(f"{where}.metadata has an empty key")
        _label(k, f"{where}.metadata key")
        if len(v) > 2048 or _bad_chars(v, allow_newlines=True):
            raise InvalidArgument(f"{where}.metadata[{k!r}] is too long or has control characters")


def validate_memories(memories: Sequence[MemoryInput], *, limits: LimitsConfig) -> None:
    if not memories:
        raise InvalidArgument("memories is empty")
    if len(memories) > limits.max_memories_per_write:
        raise InvalidArgument(f"more than {limits.max_memories_per_write} memories in one write")
    for i, m in enumerate(memories):
        validate_memory(m, limits=limits, where=f"memories[{i}]")


def validate_filter(f: Filter, *, where: str) -> None:
    if f.scope is not None:
        _label(f.scope, f"{where}.scope")
    if f.key is not None:
        _label(f.key, f"{where}.key")
    _labels(f.entities_any, f"{where}.entities_any", max_count=64)
    _labels(f.entities_all, f"{where}.entities_all", max_count=64)
    for name in ("created_after_ms", "created_before_ms", "accessed_after_ms", "accessed_before_ms"):
        _time(getattr(f, name), f"{where}.{name}")
    _unit(f.min_importance, f"{where}.min_importance")


def validate_queries(queries: Sequence[SearchQuery], *, limits: LimitsConfig) -> None:
    if not queries:
        raise InvalidArgument("queries is empty")
    if len(queries) > limits.max_queries_per_search:
        raise InvalidArgument(f"more than {limits.max_queries_per_search} queries in one search")
    for i, q in enumerate(queries):
        where = f"queries[{i}]"
        if not q.text.strip():
            raise InvalidArgument(f"{where}.text is empty")
        if len(q.text.encode()) > limits.max_query_bytes:
            raise InvalidArgument(f"{where}.text is larger than {limits.max_query_bytes} bytes")
        if _bad_chars(q.text, allow_newlines=True):
            raise InvalidArgument(f"{where}.text contains control characters")
        if not 0 <= q.top_k <= limits.max_top_k:
            raise InvalidArgument(f"{where}.top_k must be in [0, {limits.max_top_k}]")
        if not 0 <= q.candidates <= limits.max_candidates:
            raise InvalidArgument(f"{where}.candidates must be in [0, {limits.max_candidates}]")
        if not -1 <= q.rerank_depth <= limits.max_candidates:
            raise InvalidArgument(f"{where}.rerank_depth must be in [-1, {limits.max_candidates}]")
        if not 0 <= q.context_items <= 50:
            raise InvalidArgument(f"{where}.context_items must be in [0, 50]")
        if q.lexical_only and q.dense_only:
            raise InvalidArgument(f"{where}: lexical_only and dense_only exclude each other")
        s = q.scoring
        for name in ("episodic_half_life_s", "semantic_half_life_s", "procedural_half_life_s"):
            value = getattr(s, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise InvalidArgument(f"{where}.scoring.{name} must be finite and >= 0")
        _unit(s.importance_weight, f"{where}.scoring.importance_weight")
        _unit(s.decay_floor, f"{where}.scoring.decay_floor")
        _unit(s.recency_weight, f"{where}.scoring.recency_weight")
        _unit(q.min_relevance, f"{where}.min_relevance")
        _time(s.now_ms, f"{where}.scoring.now_ms")
        validate_filter(q.filter, where=f"{where}.filter")


def validate_memory_ids(ids: Sequence[str], *, limit: int) -> None:
    if not ids:
        raise InvalidArgument("memory_ids is empty")
    if len(ids) > limit:
        raise InvalidArgument(f"more than {limit} memory_ids")
    _labels(ids, "memory_ids", max_count=limit)
