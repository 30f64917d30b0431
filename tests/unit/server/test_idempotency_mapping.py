"""The idempotency key on the wire: the four mutating requests carry it under new field numbers (STYLE rule
10: appended, nothing renumbered) and the mapping hands it to the engine as it came."""

from __future__ import annotations

from engram_proto.v1 import service_pb2 as spb
from server.grpc import mapping


def test_the_key_field_is_appended_to_each_mutating_request() -> None:
    numbers = {name: spb.DESCRIPTOR.message_types_by_name[name].fields_by_name["idempotency_key"].number
               for name in ("WriteRequest", "DeleteRequest", "ConfirmRequest", "ForgetRequest")}
    assert numbers == {"WriteRequest": 3, "DeleteRequest": 3, "ConfirmRequest": 3, "ForgetRequest": 8}
    assert spb.ForgetRequest.DESCRIPTOR.fields_by_name["dry_run"].number == 7


def test_the_key_is_mapped_as_it_came() -> None:
    for request in (spb.WriteRequest(idempotency_key="k-1"), spb.DeleteRequest(idempotency_key="k-1"),
                    spb.ConfirmRequest(idempotency_key="k-1"), spb.ForgetRequest(idempotency_key="k-1")):
        assert mapping.idempotency_key_from_pb(request) == "k-1"
    assert mapping.idempotency_key_from_pb(spb.WriteRequest()) == ""
