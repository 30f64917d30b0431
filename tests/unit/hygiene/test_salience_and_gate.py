from __future__ import annotations

import dataclasses

import pytest

from server.config import MemoryConfig
from server.domain import Memory, MemoryInput, MemoryStatus, MemoryType, WriteOutcome, WriteResult
from server.hygiene.gate import needs_memory, names_of
from server.hygiene.salience import importance_from_salience, load_salience
from server.hygiene.writes import SaliencePolicy

MODEL = load_salience()


def test_low_information_turns_score_below_facts() -> None:
    low = ["Caroline: Thanks!", "Melanie: Bye! Take care!", "ok", "Haha, same here!"]
    high = ["Caroline: I moved to Lisbon in March 2023 with my two dogs",
            "Melanie: I decided to sign up for the pottery class next week",
            "User: I prefer aisle seats and I am allergic to peanuts"]
    assert max(MODEL.score(t) for t in low) < 0.01 < 0.2 < min(MODEL.score(t) for t in high)


def test_importance_follows_salience_within_the_span() -> None:
    assert importance_from_salience(0.5, default=0.5, span=0.4) == 0.5
    assert importance_from_salience(1.0, default=0.5, span=0.4) == pytest.approx(0.7)
    assert importance_from_salience(0.0, default=0.5, span=0.4) == pytest.approx(0.3)
    assert importance_from_salience(0.9, default=0.5, span=0.0) == 0.5


def test_policy_skips_only_unasked_low_salience_inputs() -> None:
    policy = SaliencePolicy(cfg=MemoryConfig(min_salience=0.1), model=MODEL)
    inputs = [MemoryInput(content="Thanks!"), MemoryInput(content="I moved to Lisbon in March 2023"),
              MemoryInput(content="Thanks!", importance=0.2), MemoryInput(content="ok", pinned=True)]
    prepared = policy.prepare(inputs)
    assert prepared.positions == [1, 2, 3]
    assert prepared.inputs[1].importance == 0.2 and prepared.inputs[0].salience == MODEL.score(inputs[1].content)
    stored = [WriteResult(memory_id=f"m{i}", outcome=WriteOutcome.CREATED, status=MemoryStatus.ACTIVE) for i in range(3)]
    out = policy.assemble(prepared, stored)
    assert [r.outcome for r in out] == [WriteOutcome.SKIPPED] + [WriteOutcome.CREATED] * 3
    assert out[0].memory_id == "" and out[0].salience == MODEL.score("Thanks!") and out[1].memory_id == "m0"
    assert SaliencePolicy(cfg=MemoryConfig(), model=MODEL).prepare(inputs).positions == [0, 1, 2, 3]  # off by default


@pytest.mark.parametrize("text", ["Hey, how are you doing?", "Thanks so much!", "ok cool", "Bye! Take care!",
                                  "你好！", "谢谢你", "好的，收到"])
def test_small_talk_is_skipped(text: str) -> None:
    assert needs_memory(text) == (False, "small talk")


@pytest.mark.parametrize(("text", "why"), [
    ("What did we decide last time?", "refers back"), ("how is that project going", "refers back"),
    ("上次我们聊的那个项目怎么样了", "refers back"), ("之前说的", "refers back"), ("ok, 3 then", "has a number"),
    ("When did Caroline go to the support group?", "has content words"), ("推荐一家餐厅", "has content words")])
def test_anything_else_recalls(text: str, why: str) -> None:
    assert needs_memory(text) == (True, why)


def test_names_the_tenant_has_seen_recall_even_when_they_are_small_talk_words() -> None:
    m = Memory(memory_id="m", doc_id=0, content="We met Sunny at the Cheers bar", type=MemoryType.EPISODIC,
               importance=0.5, created_at_ms=0, last_access_at_ms=0, access_count=0, entities=("Joy",), source_ref="",
               scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
               pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=0)
    names = names_of([m, dataclasses.replace(m, content="Caroline: Hi! Thanks, See you. Bye!", entities=())])
    assert {"sunny", "cheers", "joy"} <= names
    assert not {"we", "hi", "thanks", "see", "bye", "caroline"} & names   # capitals that only start a sentence
    assert needs_memory("cheers!") == (False, "small talk")
    assert needs_memory("cheers!", known_names=names) == (True, "names a known entity")
