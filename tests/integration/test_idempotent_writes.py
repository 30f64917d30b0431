"""Idempotent writes through the real server: a retried Write / Delete / Forget / Confirm with the same key
is answered with the first answer and applies nothing again (after a restart and a compaction too), the
same key with another request is INVALID_ARGUMENT, concurrent duplicates apply once; the SDK sends a key
by default and a retry after a lost answer (a real proxy in front of the real server) applies once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import grpc
import pytest
from grpc_proxy import LossyProxy
from support import ADMIN_KEY, start_server, status_of

from engram_client import AsyncEngramClient, EngramClient, RetryPolicy
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

FAST = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05)


def write_request(tenant: str, *contents: str, key: str, **fields: object) -> spb.WriteRequest:
    return spb.WriteRequest(tenant_id=tenant, idempotency_key=key,
                            memories=[pb.MemoryInput(content=c, **fields) for c in contents])  # type: ignore[arg-type]


def audit_ops(admin, tenant: str) -> list[int]:  # type: ignore[no-untyped-def]
    reply = admin.memory.Audit(spb.AuditRequest(tenant_id=tenant, page_size=1000), metadata=admin.metadata)
    return [e.op for e in reply.entries]


def answer(reply: spb.WriteResponse) -> list[tuple[str, int, int]]:
    return [(r.memory_id, r.outcome, r.status) for r in reply.results]


def test_a_retried_write_returns_the_same_ids_and_writes_nothing_new(admin) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant("idem")
    request = write_request("idem", "Ann lives in Oslo", "Ann's cat is called Miso", key="write-1")
    first = admin.memory.Write(request, metadata=admin.metadata)
    assert [r.outcome for r in first.results] == [spb.WRITE_OUTCOME_CREATED] * 2
    again = admin.memory.Write(request, metadata=admin.metadata)
    assert answer(again) == answer(first)
    assert [r.salience for r in again.results] == pytest.approx([r.salience for r in first.results])
    stored = admin.list_all("idem")
    assert len(stored) == 2 and all(m.access_count == 0 for m in stored)   # no merge into them either
    assert audit_ops(admin, "idem") == [spb.AUDIT_OP_WRITE]
    # a new key is a new call: the same texts again merge into the stored memories (the dedupe rule)
    other = admin.memory.Write(write_request("idem", "Ann lives in Oslo", key="write-2"), metadata=admin.metadata)
    assert other.results[0].outcome == spb.WRITE_OUTCOME_MERGED
    assert other.results[0].memory_id == first.results[0].memory_id


def test_the_same_key_with_another_request_is_refused(admin) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant("idem")
    first = admin.memory.Write(write_request("idem", "Bo likes tea", key="k"), metadata=admin.metadata)
    with pytest.raises(grpc.RpcError) as refused:
        admin.memory.Write(write_request("idem", "Bo likes coffee", key="k"), metadata=admin.metadata)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "idempotency_key 'k'" in refused.value.details() and "different Write request" in refused.value.details()
    with pytest.raises(grpc.RpcError) as refused:   # a field other than the content counts too
        admin.memory.Write(write_request("idem", "Bo likes tea", key="k", importance=0.9), metadata=admin.metadata)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [m.content for m in admin.list_all("idem")] == ["Bo likes tea"]
    # keys are per call kind: a Delete may use the same one
    deleted = admin.memory.Delete(spb.DeleteRequest(tenant_id="idem", memory_ids=[first.results[0].memory_id],
                                                    idempotency_key="k"), metadata=admin.metadata)
    assert deleted.deleted == 1
    # and per tenant: another tenant's "k" is its own
    admin.create_tenant("idem-2")
    elsewhere = admin.memory.Write(write_request("idem-2", "Bo likes coffee", key="k"), metadata=admin.metadata)
    assert elsewhere.results[0].outcome == spb.WRITE_OUTCOME_CREATED


@pytest.mark.parametrize("key, why", [("x" * 129, "at most 128"), ("has space", "letters, digits"),
                                      ("a/b", "letters, digits"), ("ключ", "letters, digits"),
                                      ("new\nline", "letters, digits")])
def test_a_malformed_key_is_invalid_argument(admin, key: str, why: str) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant("idem")
    for call in (lambda: admin.memory.Write(write_request("idem", "x", key=key), metadata=admin.metadata),
                 lambda: admin.memory.Delete(spb.DeleteRequest(tenant_id="idem", memory_ids=["m_1"], idempotency_key=key),
                                             metadata=admin.metadata)):
        with pytest.raises(grpc.RpcError) as bad:
            call()
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and why in bad.value.details()
    assert admin.list_all("idem") == []
    fine = "A-z0-9._:~" + "k" * 118
    assert admin.memory.Write(write_request("idem", "x", key=fine), metadata=admin.metadata).results[0].memory_id


def test_delete_forget_and_confirm_retries_answer_the_first_answer(admin) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant("idem")
    written = admin.memory.Write(write_request("idem", "Cy works at the harbour", "Cy has two brothers", key="w"),
                                 metadata=admin.metadata)
    doomed, kept = (r.memory_id for r in written.results)
    delete = spb.DeleteRequest(tenant_id="idem", memory_ids=[doomed, "m_nope"], idempotency_key="d")
    assert [(r.deleted, list(r.missing)) for r in (admin.memory.Delete(delete, metadata=admin.metadata),
                                                    admin.memory.Delete(delete, metadata=admin.metadata))] == \
        [(1, ["m_nope"])] * 2                  # a plain second Delete would answer 0, [doomed, "m_nope"]

    pending = admin.memory.Write(write_request("idem", "Cy might move to Bergen", key="p", confidence=0.3),
                                 metadata=admin.metadata).results[0]
    assert pending.outcome == spb.WRITE_OUTCOME_PENDING
    confirm = spb.ConfirmRequest(tenant_id="idem", memory_ids=[pending.memory_id], idempotency_key="c")
    first, again = (admin.memory.Confirm(confirm, metadata=admin.metadata) for _ in range(2))
    assert first == again and first.results[0].memory.status == pb.MEMORY_STATUS_ACTIVE

    forget = spb.ForgetRequest(tenant_id="idem", all=True, idempotency_key="f")
    answers = [admin.memory.Forget(forget, metadata=admin.metadata) for _ in range(2)]
    assert [(a.count, sorted(a.memory_ids)) for a in answers] == [(2, sorted([kept, pending.memory_id]))] * 2
    ops = audit_ops(admin, "idem")
    assert ops.count(spb.AUDIT_OP_DELETE) == 1 and ops.count(spb.AUDIT_OP_CONFIRM) == 1
    assert ops.count(spb.AUDIT_OP_ARCHIVE) == 1
    # a dry run records nothing: the key is still free for the real call (another request: dry_run differs)
    dry = spb.ForgetRequest(tenant_id="idem", all=True, dry_run=True, idempotency_key="f2")
    assert admin.memory.Forget(dry, metadata=admin.metadata).count == 0
    assert status_of(lambda: admin.memory.Forget(spb.ForgetRequest(tenant_id="idem", all=True, idempotency_key="f2"),
                                                 metadata=admin.metadata)) == grpc.StatusCode.OK


def test_a_write_that_stored_nothing_and_a_purge_are_answered_too(admin) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant("idem")
    admin.memory.UpdateSettings(spb.UpdateSettingsRequest(tenant_id="idem", settings=spb.TenantSettings(min_salience=1.0)),
                                metadata=admin.metadata)
    request = write_request("idem", "ok", key="skipped")
    first = admin.memory.Write(request, metadata=admin.metadata)
    assert first.skipped == 1 and first.results[0].outcome == spb.WRITE_OUTCOME_SKIPPED
    again = admin.memory.Write(request, metadata=admin.metadata)
    assert (again.results, again.skipped) == (first.results, first.skipped)
    # recorded, though nothing was stored: another request with the key is refused
    assert status_of(lambda: admin.memory.Write(write_request("idem", "ok!", key="skipped"), metadata=admin.metadata)) \
        == grpc.StatusCode.INVALID_ARGUMENT
    admin.memory.UpdateSettings(spb.UpdateSettingsRequest(tenant_id="idem", reset=["min_salience"]),
                                metadata=admin.metadata)
    admin.write("idem", "Hal sails a red dinghy", "Hal's sister is a pilot")
    purge = spb.ForgetRequest(tenant_id="idem", all=True, mode=spb.FORGET_MODE_DELETE, idempotency_key="purge")
    answers = [admin.memory.Forget(purge, metadata=admin.metadata) for _ in range(2)]   # a purge compacts the log
    assert answers[0] == answers[1] and answers[0].count == 2 and admin.list_all("idem") == []


def test_concurrent_duplicates_apply_once(admin) -> None:  # type: ignore[no-untyped-def]
    admin.create_tenant("idem")
    request = write_request("idem", "Dee keeps bees on the roof", key="dup")
    barrier = threading.Barrier(8)
    replies: list[spb.WriteResponse] = []

    def send() -> None:
        barrier.wait()
        replies.append(admin.memory.Write(request, metadata=admin.metadata))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(replies) == 8
    # without the key, the dedupe would answer one CREATED and seven MERGED (each counting an access)
    assert {tuple(answer(r)) for r in replies} == {tuple(answer(replies[0]))}
    assert replies[0].results[0].outcome == spb.WRITE_OUTCOME_CREATED
    stored = admin.list_all("idem")
    assert len(stored) == 1 and stored[0].access_count == 0
    assert audit_ops(admin, "idem") == [spb.AUDIT_OP_WRITE]


def test_the_answers_survive_a_compaction_and_a_restart(tmp_path: Path, jvm: None, embedder) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    running = start_server(data, embedder=embedder)
    try:
        admin = running.client()
        admin.create_tenant("durable")
        request = write_request("durable", "Eli was born in Tromsø", "Eli speaks Sami", key="w-restart")
        first = admin.memory.Write(request, metadata=admin.metadata)
        delete = spb.DeleteRequest(tenant_id="durable", memory_ids=[first.results[1].memory_id], idempotency_key="d")
        deleted = admin.memory.Delete(delete, metadata=admin.metadata)
        shard = running.app.engine.registry.loaded_shard("durable")
        assert shard is not None and shard.compact() is not None   # the log rewritten: the answers are kept
    finally:
        running.stop()
    running = start_server(data, embedder=embedder)
    try:
        admin = running.client()
        assert answer(admin.memory.Write(request, metadata=admin.metadata)) == answer(first)
        assert admin.memory.Delete(delete, metadata=admin.metadata) == deleted
        assert [m.content for m in admin.list_all("durable")] == ["Eli was born in Tromsø"]
        assert status_of(lambda: admin.memory.Write(write_request("durable", "other", key="w-restart"),
                                                    metadata=admin.metadata)) == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        running.stop()


# -- the SDK: a key on every mutating call, retries that apply once -------------------------------------------

def test_the_sdk_sends_a_key_and_a_lost_answer_applies_once(server) -> None:  # type: ignore[no-untyped-def]
    proxy = LossyProxy(server.address)
    try:
        with EngramClient(proxy.address, key=ADMIN_KEY, retry=FAST) as engram:
            engram.create_tenant("sdk")
            proxy.drop["Write"] = 1
            reply = engram.write("sdk", ["Fay plays the cello"])
            sent = proxy.requests("Write", spb.WriteRequest)
            assert len(sent) == 2 and proxy.applied["Write"] == 2   # the server answered both ...
            assert sent[0].idempotency_key and sent[0] == sent[1]  # ... the same request, the same key
            assert reply.results[0].outcome == spb.WRITE_OUTCOME_CREATED   # the first answer, not a MERGED
            stored = list(engram.iter_memories("sdk"))
            assert len(stored) == 1 and stored[0].access_count == 0
            engram.remember("sdk", "Fay moved to Lyon")
            keys = [r.idempotency_key for r in proxy.requests("Write", spb.WriteRequest)]
            assert len(set(keys)) == 2 and all(len(k) == 32 for k in keys)   # a fresh key per call

            proxy.drop["Delete"] = 1
            assert engram.delete("sdk", [reply.results[0].memory_id]).deleted == 1   # not 0: the first answer
            proxy.drop["Forget"] = 1
            assert engram.forget("sdk", all=True).count == 1
            assert [len(proxy.requests(m, t)) for m, t in (("Delete", spb.DeleteRequest),
                                                           ("Forget", spb.ForgetRequest))] == [2, 2]

            # a deadline that passed while the server committed: retried (a deadline per attempt), applied once
            stalling = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05, attempt_timeout_s=1.0)
            proxy.stall["Write"] = 1
            late = engram.call("Write", spb.WriteRequest(tenant_id="sdk", memories=[pb.MemoryInput(content="Fay is 40")]),
                               retry=stalling, timeout_s=20)
            assert late.results[0].outcome == spb.WRITE_OUTCOME_CREATED
            assert [m.content for m in engram.iter_memories("sdk")].count("Fay is 40") == 1
            # a call without a key is not retried after a deadline (it could apply twice)
            proxy.stall["Touch"] = 1
            with pytest.raises(grpc.RpcError) as late_touch:
                engram.call("Touch", spb.TouchRequest(tenant_id="sdk", memory_ids=["m_1"]), retry=stalling, timeout_s=20)
            assert late_touch.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert len(proxy.requests("Touch", spb.TouchRequest)) == 1
            # INVALID_ARGUMENT is never retried; the caller's own key is kept
            with pytest.raises(grpc.RpcError) as reused:
                engram.write("sdk", ["something else"], idempotency_key=keys[0])
            assert reused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert proxy.requests("Write", spb.WriteRequest)[-1].idempotency_key == keys[0]
            assert len(proxy.requests("Write", spb.WriteRequest)) == 6   # 2 + 1 + 2 (the stall) + 1: no retry
    finally:
        proxy.close()


def test_the_async_client_retries_a_lost_answer_once(server) -> None:  # type: ignore[no-untyped-def]
    proxy = LossyProxy(server.address)

    async def run() -> None:
        async with AsyncEngramClient(proxy.address, key=ADMIN_KEY, retry=FAST) as engram:
            await engram.create_tenant("sdk-aio")
            proxy.drop["Write"] = 1
            reply = await engram.write("sdk-aio", ["Gil collects stamps"], importance=0.7)
            assert reply.results[0].outcome == spb.WRITE_OUTCOME_CREATED
            proxy.drop["Confirm"] = 1
            confirmed = await engram.confirm("sdk-aio", [reply.results[0].memory_id])
            assert confirmed.results[0].memory.status == pb.MEMORY_STATUS_ACTIVE
            stored = [m async for m in engram.iter_memories("sdk-aio")]
            assert len(stored) == 1 and stored[0].access_count == 0

    try:
        asyncio.run(run())
        sent = proxy.requests("Write", spb.WriteRequest)
        assert len(sent) == 2 and sent[0].idempotency_key and sent[0] == sent[1]
        assert len({r.idempotency_key for r in proxy.requests("Confirm", spb.ConfirmRequest)}) == 1
    finally:
        proxy.close()
