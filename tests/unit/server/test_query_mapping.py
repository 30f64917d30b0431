"""SearchQuery.feedback across the wire: unset (the server's rule), true and false stay distinct."""

from __future__ import annotations

from server.grpc import mapping
from engram_proto.v1 import messages_pb2 as pb


def test_feedback_unset_true_and_false_map_to_none_true_false() -> None:
    assert mapping.query_from_pb(pb.SearchQuery(text="q")).feedback is None
    assert mapping.query_from_pb(pb.SearchQuery(text="q", feedback=True)).feedback is True
    assert mapping.query_from_pb(pb.SearchQuery(text="q", feedback=False)).feedback is False
