"""SIGKILL of a server subprocess under keyed writes, then the clients' retries after the restart.

Each writer sends Writes with an idempotency key until the kill; the call in flight then has an unknown
outcome (its commit may or may not have reached the log). After the restart every call is sent again with
its key and its request: a call whose outcome was unknown is applied exactly once (by the retry when the
kill came before its commit, answered from its record when after), an acknowledged one answers its first
answer, and the tenant holds each written memory exactly once. Compaction runs all the time (as in
``test_crash_safety``'s COMPACTING), so kills land around compactions and the keys must survive them."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from reliability.proc import ServerProcess, free_port
from support import Client

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

TENANT = "idem/crash"
WRITERS = 3
COMPACTING = {"ENGRAM_STORAGE__COMPACT_RATIO": "1.05", "ENGRAM_STORAGE__COMPACT_MIN_MB": "0.01"}


@dataclass
class Sent:
    request: spb.WriteRequest
    reply: spb.WriteResponse | None = None   # None: no answer came (the kill): the outcome is unknown


def _answer(reply: spb.WriteResponse) -> list[tuple[str, int]]:
    return [(r.memory_id, r.outcome) for r in reply.results]


def _writer(client: Client, sent: list[Sent], *, name: str) -> None:
    for i in range(100_000):
        # Numbers differ between any two texts, so the near-duplicate rule never merges them; each note
        # supersedes the writer's previous one (one memory key per writer): the updated versions make the
        # log outgrow its live data, so compactions run.
        request = spb.WriteRequest(tenant_id=TENANT, idempotency_key=f"{name}-{i}", memories=[
            pb.MemoryInput(content=f"Crash writer {name} wrote note number {i} about the harbour", key=name)])
        entry = Sent(request)
        sent.append(entry)
        try:
            entry.reply = client.memory.Write(request, metadata=client.metadata, timeout=60)
        except grpc.RpcError as exc:
            # The kill: UNAVAILABLE when the transport sees the server go first, CANCELLED when the harness closes
            # this client's channel first (ServerProcess._reap); either way the call's outcome is unknown.
            assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), exc
            return


def run_kills(tmp_path: Path, *, kills: int, seed: int) -> Counter[str]:
    server = ServerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "server.log",
                           env={"ENGRAM_LUCENE_COMMIT_INTERVAL_S": "0.3", **COMPACTING}).start()
    rng = random.Random(seed)
    sent: list[Sent] = []
    totals: Counter[str] = Counter()
    try:
        server.client().create_tenant(TENANT)
        for round_no in range(kills):
            threads = [threading.Thread(target=_writer, args=(server.client(), sent), kwargs={"name": f"r{round_no}w{w}"})
                       for w in range(WRITERS)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(1.0, 3.0))
            server.kill()
            for t in threads:
                t.join(60)
            server.port = free_port()
            server.start()
            client = server.client()
            for entry in sent:   # every call again, with its key and its request
                reply = client.memory.Write(entry.request, metadata=client.metadata, timeout=60)
                if entry.reply is None:
                    totals["unknown"] += 1
                    entry.reply = reply
                else:
                    assert _answer(reply) == _answer(entry.reply), entry.request.idempotency_key
                    totals["acked_retried"] += 1
                assert reply.results[0].outcome == spb.WRITE_OUTCOME_CREATED
            held = Counter(m.content for m in client.list_all(TENANT))
            wanted = Counter(e.request.memories[0].content for e in sent)
            assert held == wanted, (held - wanted, wanted - held)   # each once: none lost, none twice
            assert {m.memory_id for m in client.list_all(TENANT)} == {e.reply.results[0].memory_id for e in sent
                                                                       if e.reply is not None}
            totals["kills"] += 1
        totals["writes"] = len(sent)
    finally:
        server.stop()
    totals["compactions"] = server.log_text().count("log compacted")
    return totals


def test_retries_after_a_sigkill_apply_each_write_once(tmp_path: Path) -> None:
    totals = run_kills(tmp_path, kills=2, seed=18)
    print(f"\nkeyed writes under SIGKILL: {dict(totals)}")
    assert totals["kills"] == 2 and totals["unknown"] >= 2 and totals["acked_retried"] > 0, totals
    assert totals["compactions"] > 0, totals


@pytest.mark.slow
def test_ten_sigkills_under_keyed_writes(tmp_path: Path) -> None:
    totals = run_kills(tmp_path, kills=10, seed=1018)
    print(f"\nkeyed writes under SIGKILL: {dict(totals)}")
    assert totals["kills"] == 10 and totals["unknown"] >= 10, totals
