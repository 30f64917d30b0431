"""JSON ↔ domain for the console. Replies are generic (every field of a domain dataclass, enums by name),
so a field added to ``Memory``, ``Breakdown`` or ``AuditEntry`` reaches the page without a change here;
requests name their fields explicitly and every bad value is an InvalidArgument naming it."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

from server.domain import (
    AuditOp,
    Breakdown,
    Filter,
    ForgetMode,
    ForgetSpec,
    MemoryStatus,
    MemoryType,
    Scoring,
    SearchQuery,
)
from server.errors import InvalidArgument


def to_json(value: Any) -> Any:
    """Domain values as JSON values: dataclasses as objects (declared field order), enums by name,
    tuples and sets as lists, non-finite floats as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_json(v) for v in value)
    return value


def breakdown_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(Breakdown)]


# -- request fields --------------------------------------------------------------------------------------
def _enum(cls: type[enum.Enum], name: str, where: str) -> Any:
    try:
        return cls[str(name).upper()]
    except KeyError:
        raise InvalidArgument(f"{where}: unknown value {name!r} (one of {', '.join(m.name for m in cls)})") from None


def _enums(cls: type[enum.Enum], values: Any, where: str) -> frozenset[Any]:
    return frozenset(_enum(cls, v, where) for v in _strings(values, where))


def _strings(values: Any, where: str) -> list[str]:
    if values is None or values == "":
        return []
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidArgument(f"{where} must be a list of strings")
    return [v for v in values if v]


def _int(value: Any, where: str, default: int = 0) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise InvalidArgument(f"{where} must be an integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{where} must be an integer") from None
    if isinstance(value, float) and value != number:
        raise InvalidArgument(f"{where} must be an integer")
    return number


def _float(value: Any, where: str) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidArgument(f"{where} must be a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{where} must be a number") from None
    if not math.isfinite(number):
        raise InvalidArgument(f"{where} must be a finite number")
    return number


def _bool(value: Any, where: str) -> bool:
    if value in (None, "", False, "false", "0"):
        return False
    if value in (True, "true", "1", "on"):
        return True
    raise InvalidArgument(f"{where} must be true or false")


def _optional_text(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{where} must be a string")
    return value


def filter_from_json(d: Mapping[str, Any], *, where: str = "filter") -> Filter:
    """A Filter from ``{"types": [...], "statuses": [...], "entities": [...], "entities_all": [...], "key",
    "scope", "created_after_ms", "created_before_ms", "min_importance"}`` (every field optional)."""
    times = {name: _int(d.get(name), f"{where}.{name}") for name in
             ("created_after_ms", "created_before_ms", "accessed_after_ms", "accessed_before_ms")}
    for name, value in times.items():
        if value < 0:
            raise InvalidArgument(f"{where}.{name} must be >= 0")
    return Filter(types=_enums(MemoryType, d.get("types"), f"{where}.types"),
                  statuses=_enums(MemoryStatus, d.get("statuses"), f"{where}.statuses"),
                  entities_any=frozenset(_strings(d.get("entities"), f"{where}.entities")),
                  entities_all=frozenset(_strings(d.get("entities_all"), f"{where}.entities_all")),
                  key=_optional_text(d.get("key"), f"{where}.key"),
                  scope=_optional_text(d.get("scope"), f"{where}.scope"),
                  min_importance=_float(d.get("min_importance"), f"{where}.min_importance"), **times)


def filter_from_params(params: Mapping[str, list[str]]) -> dict[str, Any]:
    """Query-string parameters (repeatable ``type``, ``status``, ``entity``) in the shape filter_from_json reads."""
    one = {name: values[0] for name, values in params.items() if values}
    return {"types": params.get("type", []), "statuses": params.get("status", []),
            "entities": params.get("entity", []), "key": one.get("key"), "scope": one.get("scope"),
            "created_after_ms": one.get("created_after_ms"), "created_before_ms": one.get("created_before_ms"),
            "min_importance": one.get("min_importance")}


def query_from_json(d: Mapping[str, Any]) -> SearchQuery:
    """The playground's query: always with the prompt-ready context block, exactly as an agent asks for it."""
    text = d.get("text")
    if not isinstance(text, str):
        raise InvalidArgument("text must be a string")
    flt = filter_from_json(d.get("filter") or {}, where="filter")
    return SearchQuery(text=text, top_k=_int(d.get("top_k"), "top_k"), filter=flt,
                       include_pending=_bool(d.get("include_pending"), "include_pending"),
                       include_history=_bool(d.get("include_history"), "include_history"),
                       rerank_depth=_int(d.get("rerank_depth"), "rerank_depth"),
                       scoring=Scoring(now_ms=_int(d.get("as_of_ms"), "as_of_ms")),
                       lexical_only=_bool(d.get("lexical_only"), "lexical_only"),
                       dense_only=_bool(d.get("dense_only"), "dense_only"),
                       context_block=True, context_items=_int(d.get("context_items"), "context_items"))


def forget_from_json(d: Mapping[str, Any]) -> ForgetSpec:
    older = _int(d.get("older_than_ms"), "older_than_ms")
    return ForgetSpec(filter=filter_from_json(d.get("filter") or {}), older_than_ms=older,
                      mode=_enum(ForgetMode, d.get("mode") or "ARCHIVE", "mode"),
                      include_pinned=_bool(d.get("include_pinned"), "include_pinned"),
                      all=_bool(d.get("all"), "all"), dry_run=_bool(d.get("dry_run"), "dry_run"))


def audit_ops(values: Any) -> frozenset[AuditOp]:
    return _enums(AuditOp, values, "op")


def memory_ids(d: Mapping[str, Any]) -> list[str]:
    ids = _strings(d.get("ids"), "ids")
    if not ids:
        raise InvalidArgument("ids is empty")
    return ids


def integer(value: Any, where: str, default: int = 0) -> int:
    return _int(value, where, default)
