"""Hypothesis fuzzing of request messages against the running server.

Requests are generated from the message descriptors (so RPCs added later are fuzzed too): any unicode,
NaN and infinities, out-of-range and negative integers, unknown enum values, big repeated fields, and raw
random bytes. Every answer is OK or a client-error status — never INTERNAL, UNKNOWN or UNAVAILABLE — a
rejected mutation changes nothing, and the server still serves afterwards.
"""

from __future__ import annotations

import os
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability.hostile import TENANTS, admin_metadata, assert_serving, call, snapshot
from engram_proto.v1 import service_pb2 as spb

C = grpc.StatusCode
CLIENT_ERRORS = {C.OK, C.INVALID_ARGUMENT, C.NOT_FOUND, C.PERMISSION_DENIED, C.ALREADY_EXISTS,
                 C.FAILED_PRECONDITION, C.OUT_OF_RANGE, C.RESOURCE_EXHAUSTED}
# Fuzzed RPCs: every MemoryService RPC and the admin RPCs that cannot lock the test out.
SKIP = {"AdminService/DeleteTenant", "AdminService/RevokeKey", "AdminService/RotateKey"}
MUTATING = {"Write", "Delete", "Confirm", "Forget", "CreateTenant", "UpdateSettings"}
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "120"))

texts = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.sampled_from(["", " ", "\n", "tea", "a\x00b", "\x1b[31m", "\u202e", "ｔｅａ", "x" * 5000]),
)
tenant_ids = st.one_of(st.sampled_from([*TENANTS, "ACME", "acme/", "аcme", "acme\n", "nobody", "acme/alice/x"]),
                       texts)
INT_RANGES = {FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
              FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1), FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1)}


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([0, 1, -1, lo, hi, 5, 50, 1000]), st.integers(lo, hi))


def _scalar(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any] | None:
    t = field.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        return None if depth >= 3 else message_strategy(field.message_type, depth + 1)
    if t == FieldDescriptor.TYPE_STRING:
        return tenant_ids if field.name.endswith("tenant_id") else texts
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == FieldDescriptor.TYPE_FLOAT:
        return st.floats(width=32)
    if t == FieldDescriptor.TYPE_DOUBLE:
        return st.floats()
    if t == FieldDescriptor.TYPE_ENUM:
        return _ints(-3, 12)
    if t in INT_RANGES:
        return _ints(*INT_RANGES[t])
    return None


def message_strategy(desc: Descriptor, depth: int = 0) -> st.SearchStrategy[Any]:
    cls = message_factory.GetMessageClass(desc)
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in desc.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            optional[field.name] = st.dictionaries(texts, texts, max_size=6)
            continue
        inner = _scalar(field, depth)
        if inner is None:
            continue
        repeated = field.is_repeated
        optional[field.name] = st.lists(inner, max_size=5) if repeated else inner

    def build(values: dict[str, Any]) -> Any:
        message = cls()
        for name, value in values.items():
            field = desc.fields_by_name[name]
            target = getattr(message, name) if field.type == FieldDescriptor.TYPE_MESSAGE else None
            if isinstance(value, dict):
                target.update(value)  # type: ignore[union-attr]
            elif field.is_repeated and target is not None:
                for item in value:
                    target.add().CopyFrom(item)
            elif field.is_repeated:
                getattr(message, name).extend(value)
            elif target is not None:
                target.CopyFrom(value)
            else:
                setattr(message, name, value)
        return message

    return st.fixed_dictionaries({}, optional=optional).map(build)


def _rpcs() -> list[tuple[str, Descriptor]]:
    out = []
    for service in ("MemoryService", "AdminService"):
        for method in spb.DESCRIPTOR.services_by_name[service].methods:
            if f"{service}/{method.name}" not in SKIP:
                out.append((f"{service}/{method.name}", method.input_type))
    return out


requests = st.one_of(*[st.tuples(st.just(rpc), message_strategy(desc)) for rpc, desc in _rpcs()],
                     st.tuples(st.sampled_from([rpc for rpc, _ in _rpcs()]), st.binary(max_size=200)))


def _check(channel: grpc.Channel, rpc: str, request: Any) -> None:
    mutating = rpc.split("/")[1] in MUTATING
    before = snapshot(channel) if mutating else None
    code, _ = call(channel, rpc, request, metadata=admin_metadata())
    assert code in CLIENT_ERRORS, (rpc, code, request)
    if mutating and code != C.OK:
        assert snapshot(channel) == before, (rpc, code, request)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(item=requests)
def test_fuzzed_requests_get_a_client_status_and_rejected_ones_change_nothing(channel: grpc.Channel,
                                                                               item: tuple[str, Any]) -> None:
    _check(channel, *item)


def test_server_still_serves_after_fuzzing(channel: grpc.Channel) -> None:
    assert_serving(channel)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(item=requests)
def test_two_thousand_fuzzed_requests(channel: grpc.Channel, item: tuple[str, Any]) -> None:
    _check(channel, *item)
