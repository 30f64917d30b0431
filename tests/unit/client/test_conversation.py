"""The SDK's conversation writer: each turn one EPISODIC memory with its predecessor as its context."""

from __future__ import annotations

from engram_proto.v1 import messages_pb2 as pb
from engram_client._core import conversation_inputs


def test_each_turn_carries_the_previous_turn_as_context_and_a_source_ref() -> None:
    turns = [("Caroline", "I went to a support group yesterday."),
             {"speaker": "Melanie", "text": "How did it go?", "created_at_ms": 1683554160000},
             ("Caroline", "It was powerful.")]
    out = conversation_inputs(turns, conversation_id="conv-26", start=4, previous="Melanie: Hi Caroline!")
    assert [m.content for m in out] == ["Caroline: I went to a support group yesterday.", "Melanie: How did it go?",
                                        "Caroline: It was powerful."]
    assert [m.context for m in out] == ["Melanie: Hi Caroline!", out[0].content, out[1].content]
    assert [m.source_ref for m in out] == ["conv-26#4", "conv-26#5", "conv-26#6"]
    assert all(m.type == pb.MEMORY_TYPE_EPISODIC for m in out) and out[1].created_at_ms == 1683554160000


def test_common_fields_apply_and_a_turn_may_override_them() -> None:
    out = conversation_inputs([("A", "x"), {"speaker": "B", "text": "y", "importance": 0.9}], importance=0.3)
    assert [round(m.importance, 2) for m in out] == [0.3, 0.9] and out[0].context == "" and not out[0].source_ref
