"""The SDK's read-write loop (engram_client.loop) against the real in-process server: recall before answering,
remember after, touch what was used — one call, sync and asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from support import ADMIN_KEY, start_server

from engram_proto.v1 import service_pb2 as spb
from engram_client import AsyncEngramClient, EngramClient, aturn, end_turn, turn

FACTS = ["Alice is allergic to peanuts", "Alice's cat is called Miso", "Alice works as a nurse in Lisbon"]


@pytest.fixture(scope="module")
def engram(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder: Any) -> Iterator[EngramClient]:
    # Searches do not count as uses here (only the loop's Touch does): a flush between the direct Search and the
    # turn's recall cannot move the access boost between them.
    running = start_server(tmp_path_factory.mktemp("loop") / "data", embedder=embedder,
                           access_top_hits=0)
    with EngramClient(running.address, key=ADMIN_KEY) as client:
        client.create_tenant("loop/a", initial=FACTS)
        client.create_tenant("loop/b", initial=FACTS)
        yield client
    running.stop()


def counts(client: EngramClient, tenant: str) -> dict[str, int]:
    return {m.memory_id: m.access_count for m in client.iter_memories(tenant)}


def test_turn_recalls_answers_remembers_and_touches(engram: EngramClient) -> None:
    before = counts(engram, "loop/a")
    prompts: list[str] = []

    def answer(recalled) -> str:  # type: ignore[no-untyped-def]
        prompts.append(recalled.context)
        return "Try rice crackers: no peanuts."

    direct = engram.search("loop/a", "What snack can I pack for Alice?", top_k=2)  # what the turn will recall
    done = turn(engram, "loop/a", "What snack can I pack for Alice?", answer, source_ref="chat-1#1", top_k=2)
    assert [h.memory.memory_id for h in done.recall.hits] == [h.memory.memory_id for h in direct.hits]
    assert prompts == [done.recall.context] and done.answer == "Try rice crackers: no peanuts."
    assert done.used == [h.memory.memory_id for h in done.recall.hits] and done.missing == []

    assert [w.outcome for w in done.written] == [spb.WRITE_OUTCOME_CREATED] * 2
    user, assistant = engram.get("loop/a", [w.memory_id for w in done.written]).memories
    assert (user.content, assistant.content) == ("User: What snack can I pack for Alice?",
                                                 "Assistant: Try rice crackers: no peanuts.")
    assert assistant.context == user.content  # indexed with the question it answers, as write_conversation does
    assert {user.source_ref, assistant.source_ref} == {"chat-1#1"} and user.type == assistant.type == 1  # episodic
    after = counts(engram, "loop/a")
    assert [i for i in before if after[i] > before[i]] == [i for i in before if i in done.used]
    audit = list(engram.iter_audit("loop/a", ops=["use"]))  # the touch, as the audit log records it
    assert sorted(r.memory_id for r in audit[-1].refs) == sorted(done.used)


def test_end_turn_writes_what_it_is_given_and_marks_only_the_used(engram: EngramClient) -> None:
    recalled = engram.recall("loop/a", "where does Alice work?", top_k=3)
    chosen = [recalled.hits[0].memory.memory_id]
    before = counts(engram, "loop/a")
    done = end_turn(engram, "loop/a", memories=["Alice asked for a night-shift schedule"], used_ids=chosen + chosen,
                    source_ref="chat-2#5", importance=0.8)
    assert done.used == chosen and len(done.written) == 1
    memory = engram.get("loop/a", [done.written[0].memory_id]).memories[0]
    assert memory.source_ref == "chat-2#5" and memory.importance == pytest.approx(0.8)
    after = counts(engram, "loop/a")
    assert [i for i in before if after[i] != before[i]] == chosen

    uses = len(list(engram.iter_audit("loop/a", ops=["use"])))
    assert turn(engram, "loop/a", "hello", "hi!", remember=[]).recall.skipped == "small talk"   # the recall gate
    nothing = turn(engram, "loop/a", "hello", "hi!", remember=[], used=[], gate=False)
    assert nothing.written == [] and nothing.used == [] and nothing.recall.hits
    assert set(counts(engram, "loop/a")) == set(after)  # nothing written
    assert len(list(engram.iter_audit("loop/a", ops=["use"]))) == uses  # nothing marked as used

    gone = end_turn(engram, "loop/a", used_ids=["m_never_existed"])
    assert gone.used == [] and gone.missing == ["m_never_existed"]


def test_async_turn_is_the_same_loop(engram: EngramClient) -> None:
    before = counts(engram, "loop/b")

    async def main():  # type: ignore[no-untyped-def]
        async with AsyncEngramClient(engram.address, key=ADMIN_KEY) as client:
            async def answer(recalled) -> str:  # type: ignore[no-untyped-def]
                await asyncio.sleep(0)
                return f"{len(recalled.hits)} things"

            return await aturn(client, "loop/b", "Is Alice allergic to anything?", answer, top_k=1,
                               remember={"content": "Alice's allergy came up in chat 9", "type": "semantic"},
                               source_ref="chat-9#2")

    done = asyncio.run(main())
    assert done.answer == "1 things" and done.recall.hits[0].memory.content == "Alice is allergic to peanuts"
    stored = engram.get("loop/b", [done.written[0].memory_id]).memories[0]
    assert (stored.content, stored.type, stored.source_ref) == ("Alice's allergy came up in chat 9", 2, "chat-9#2")
    after = counts(engram, "loop/b")
    assert [i for i in before if after[i] != before[i]] == done.used == [done.recall.hits[0].memory.memory_id]
