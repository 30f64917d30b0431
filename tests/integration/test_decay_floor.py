"""A decay floor keeps an old but relevant memory above fresh weak matches, per request or by config."""

from __future__ import annotations

import time

import pytest

from engram_proto.v1 import messages_pb2 as pb
from server.engine.ranking import RECENCY_WEIGHT as A

YEAR_MS = 365 * 24 * 3600 * 1000


def test_decay_floor_per_request(admin) -> None:
    admin.create_tenant("t")
    now = int(time.time() * 1000)
    old = pb.MemoryInput(content="Caroline adopted a rescue dog named Biscuit", type=pb.MEMORY_TYPE_EPISODIC,
                         created_at_ms=now - YEAR_MS)
    fresh = pb.MemoryInput(content="Caroline went to the park this morning", type=pb.MEMORY_TYPE_EPISODIC)
    old_id, fresh_id = (r.memory_id for r in admin.write("t", old, fresh).results)
    query = "what is the name of Caroline's rescue dog?"
    # The bounded default: a year unused costs at most the recency weight, so the answer stays first.
    plain = admin.search("t", query, top_k=2, scoring=pb.Scoring(now_ms=now))
    assert [h.memory.memory_id for h in plain.hits] == [old_id, fresh_id]
    assert plain.hits[0].breakdown.decay < 1e-6 and plain.hits[0].breakdown.recency == pytest.approx(1 - A, abs=1e-4)
    # The original plain curve (recency weight 1) lets the fresh weak match win: what the default replaced.
    curve = admin.search("t", query, top_k=2, scoring=pb.Scoring(now_ms=now, recency_weight=1.0))
    assert [h.memory.memory_id for h in curve.hits] == [fresh_id, old_id]
    half = {h.memory.memory_id: h.breakdown for h in
            admin.search("t", query, top_k=2, scoring=pb.Scoring(now_ms=now, decay_floor=0.5, recency_weight=1.0)).hits}
    assert half[old_id].decay == pytest.approx(0.5, abs=1e-4) and half[old_id].recency == pytest.approx(0.5, abs=1e-4)
    assert half[old_id].final == pytest.approx(half[old_id].relevance * 0.5 * half[old_id].importance_weight, rel=1e-4)
    assert half[fresh_id].decay > 0.99
    # A floor of 1 turns decay off: relevance alone orders them.
    floored = admin.search("t", query, top_k=2, scoring=pb.Scoring(now_ms=now, decay_floor=1.0, recency_weight=1.0))
    assert [h.memory.memory_id for h in floored.hits] == [old_id, fresh_id]



