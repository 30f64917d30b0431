"""The SDK's pure parts: backoff, enum names, request builders."""

from __future__ import annotations

import random

import grpc
import pytest
from google.protobuf.json_format import ParseError

from engram_proto.v1 import messages_pb2 as pb
from engram_client import _core


def test_backoff_grows_exponentially_and_is_capped() -> None:
    policy = _core.RetryPolicy(initial_backoff_s=0.1, multiplier=2.0, max_backoff_s=0.5)
    rng = random.Random(0)
    for attempt, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)]:
        samples = [policy.backoff_s(attempt, rng=rng) for _ in range(200)]
        assert 0.0 <= min(samples) and max(samples) <= cap
        assert max(samples) > cap * 0.8  # full jitter reaches near the cap


def test_only_listed_codes_are_retried_and_attempts_are_bounded() -> None:
    policy = _core.RetryPolicy(max_attempts=3)
    assert policy.should_retry(grpc.StatusCode.UNAVAILABLE, 1)
    assert policy.should_retry(grpc.StatusCode.UNAVAILABLE, 2)
    assert not policy.should_retry(grpc.StatusCode.UNAVAILABLE, 3)
    assert not policy.should_retry(grpc.StatusCode.INVALID_ARGUMENT, 1)
    assert not _core.NO_RETRY.should_retry(grpc.StatusCode.UNAVAILABLE, 1)


def test_enum_names_accept_short_and_full_forms() -> None:
    assert _core.enum_value("MemoryType", "episodic") == pb.MEMORY_TYPE_EPISODIC
    assert _core.enum_value("MemoryType", "MEMORY_TYPE_PROCEDURAL") == pb.MEMORY_TYPE_PROCEDURAL
    assert _core.enum_value("MemoryStatus", "pending") == pb.MEMORY_STATUS_PENDING
    with pytest.raises(ValueError, match="episodic, semantic, procedural"):
        _core.enum_value("MemoryType", "emotional")


def test_memory_input_from_dict_and_common_fields() -> None:
    m = _core.memory_input({"content": "x", "type": "semantic", "importance": 0.25, "entities": ["a"],
                            "created_at_ms": "17", "metadata": {"k": "v"}})
    assert (m.type, m.importance, list(m.entities), m.created_at_ms, dict(m.metadata)) == (
        pb.MEMORY_TYPE_SEMANTIC, 0.25, ["a"], 17, {"k": "v"})
    request = _core.write_request("t", ["plain", {"content": "own", "importance": 0.9}],
                                  {"type": "episodic", "importance": 0.1, "source_ref": "turn-1"})
    first, second = request.memories
    assert (first.content, first.importance, first.source_ref) == ("plain", pytest.approx(0.1), "turn-1")
    assert (second.importance, second.type) == (pytest.approx(0.9), pb.MEMORY_TYPE_EPISODIC)
    with pytest.raises(ParseError):
        _core.memory_input({"content": "x", "importportance": 1})


def test_search_query_with_filter_and_scoring_dicts() -> None:
    q = _core.search_query("q", top_k=3, filter={"types": ["episodic"], "entities_any": ["bob"]},
                           scoring={"disable_decay": True})
    assert list(q.filter.types) == [pb.MEMORY_TYPE_EPISODIC] and q.scoring.disable_decay and q.top_k == 3


def test_every_proto_rpc_is_callable_by_name() -> None:
    names = _core.rpc_names()
    assert {"Write", "Search", "Get", "Delete", "List", "Info", "CreateTenant", "ListTenants",
            "CreateKey"} <= set(names)
    assert _core.response_class(names["Search"], "Search").__name__ == "SearchResponse"


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


TYPED = {"List": "list_page", "Audit": "audit_page"}  # paginated RPCs: a page method plus an iterator


def test_every_rpc_has_a_typed_method_on_both_clients() -> None:
    from engram_client import AsyncEngramClient, EngramClient

    for rpc in _core.rpc_names():
        name = TYPED.get(rpc, _snake(rpc))
        for cls in (EngramClient, AsyncEngramClient):
            assert hasattr(cls, name), (f"{cls.__name__}.{name} is missing for RPC {rpc}: add a one-line method "
                                        f"in engram_client/client.py and aio.py calling self.call({rpc!r}, ...)")
