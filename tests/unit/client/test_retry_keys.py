"""The SDK's idempotency keys and which calls it retries on an unknown outcome (no server: the pure parts)."""

from __future__ import annotations

import grpc

from engram_client import _core
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

UNAVAILABLE, DEADLINE, INVALID = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                                  grpc.StatusCode.INVALID_ARGUMENT)


def test_the_mutating_calls_with_a_key_are_read_from_the_proto() -> None:
    assert _core.keyed_rpcs() == {"Write", "Delete", "Forget", "Confirm"}
    assert _core.READS <= set(_core.rpc_names())
    assert not _core.READS & _core.keyed_rpcs()


def test_a_keyed_request_gets_a_fresh_key_on_a_copy_and_keeps_its_own() -> None:
    keyed = _core.keyed_rpcs()
    request = spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="x")])
    sent, idempotent = _core.prepare_call("Write", request, keyed)
    assert idempotent and len(sent.idempotency_key) == 32 and request.idempotency_key == ""   # caller's untouched
    assert sent.memories == request.memories
    again, _ = _core.prepare_call("Write", request, keyed)
    assert again.idempotency_key != sent.idempotency_key     # the same message sent again is a new call
    own = spb.DeleteRequest(tenant_id="t", memory_ids=["m"], idempotency_key="mine")
    assert _core.prepare_call("Delete", own, keyed) == (own, True)
    touch = spb.TouchRequest(tenant_id="t")
    assert _core.prepare_call("Touch", touch, keyed) == (touch, False)
    assert _core.prepare_call("Search", spb.SearchRequest(), keyed)[1]


def test_unknown_outcomes_are_retried_only_where_a_repeat_is_safe() -> None:
    policy = _core.RetryPolicy(max_attempts=3)
    for code in (UNAVAILABLE, DEADLINE):
        assert policy.should_retry(code, 1, idempotent=True)
        assert not policy.should_retry(code, 3, idempotent=True)          # bounded
    assert policy.should_retry(UNAVAILABLE, 1, idempotent=False)
    assert not policy.should_retry(DEADLINE, 1, idempotent=False)         # a keyless call may have applied
    assert not policy.should_retry(INVALID, 1, idempotent=True)


def test_a_deadline_per_attempt_leaves_time_for_a_retry() -> None:
    now = [0.0]
    attempts = _core.Attempts(_core.RetryPolicy(attempt_timeout_s=2.0, initial_backoff_s=0.0), 5.0,
                              clock=lambda: now[0])
    assert attempts.next_timeout_s() == 2.0

    class Late(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return DEADLINE

    now[0] = 2.0
    assert attempts.delay_after(Late()) == 0.0
    now[0] = 4.5
    assert attempts.next_timeout_s() == 0.5                           # what is left of the call's deadline
    keyless = _core.Attempts(_core.RetryPolicy(attempt_timeout_s=2.0), 5.0, idempotent=False, clock=lambda: 0.0)
    keyless.next_timeout_s()
    assert keyless.delay_after(Late()) is None
