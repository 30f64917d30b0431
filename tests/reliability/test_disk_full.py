"""A full disk, for real: an ``engram serve`` subprocess on a 24 MB tmpfs with no watermark (so writes meet
ENOSPC itself) is written to by four clients until the disk fills. Every answer is OK or RESOURCE_EXHAUSTED
"storage full" (never INTERNAL); searches keep working; freeing space lets writes resume without a restart;
the disk fills again and the server is SIGKILLed at that moment; after a restart with space, every
acknowledged write is there and searchable. The counts are printed for the README ("Guarantees")."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
import pytest
from small_fs import fill, small_filesystem

from reliability.crash import token
from reliability.proc import ServerProcess, free_port
from server.grpc.gen.engram.v1 import messages_pb2 as pb
from server.grpc.gen.engram.v1 import service_pb2 as spb

TENANT = "disk/full"


def write_until(client, *, worker: int, start: int, acked: dict[str, str], statuses: Counter[str],
                lock: threading.Lock, stop: threading.Event, refusals: int) -> None:
    n, refused = start, 0
    while not stop.is_set() and refused < refusals:
        tokens = [token(worker, n + i) for i in range(8)]
        n += 8
        memories = [pb.MemoryInput(content=f"{t} " + "filler words about the disk " * 6) for t in tokens]
        try:
            reply = client.memory.Write(spb.WriteRequest(tenant_id=TENANT, memories=memories),
                                        metadata=client.metadata, timeout=60)
        except grpc.RpcError as exc:
            with lock:
                statuses[exc.code().name] += 1
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    assert "storage full" in (exc.details() or ""), exc.details()
            refused += exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            time.sleep(0.05)
            continue
        with lock:
            statuses["OK"] += 1
            for t, r in zip(tokens, reply.results, strict=True):
                acked[t] = r.memory_id


def run_writers(server: ServerProcess, *, first: int, acked: dict[str, str], statuses: Counter[str],
                refusals: int, stop: threading.Event | None = None) -> None:
    lock = threading.Lock()
    stop = stop or threading.Event()
    threads = [threading.Thread(target=write_until, daemon=True,
                                kwargs={"client": server.client(), "worker": w, "start": first, "acked": acked,
                                        "statuses": statuses, "lock": lock, "stop": stop, "refusals": refusals})
               for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)


@pytest.mark.slow
def test_a_full_disk_is_answered_and_every_acknowledged_write_survives(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", size_mb=24) as fs:
        server = ServerProcess(data_dir=fs / "data", log_path=tmp_path / "server.log",
                               env={"ENGRAM_STORAGE__MIN_FREE_MB": "0", "ENGRAM_LUCENE_COMMIT_INTERVAL_S": "0.5"}).start()
        acked: dict[str, str] = {}
        statuses: Counter[str] = Counter()
        try:
            admin = server.client()
            admin.create_tenant(TENANT)
            spare = fs / "spare.bin"
            spare.write_bytes(b"\0" * (3 << 20))       # freed later: "space returns"
            filler = fill(fs, leave_bytes=3 << 20)
            run_writers(server, first=0, acked=acked, statuses=statuses, refusals=5)
            full_first = dict(statuses)
            assert statuses["RESOURCE_EXHAUSTED"] >= 20 and statuses["OK"] > 0, statuses
            some = next(iter(acked))
            assert admin.search(TENANT, some, lexical_only=True).hits, "searches must keep working on a full disk"
            spare.unlink()                                # writes resume, no restart
            resumed = Counter()
            run_writers(server, first=100_000, acked=acked, statuses=resumed, refusals=3)
            assert resumed["OK"] > 0, resumed
            statuses.update(resumed)
            # full again: SIGKILL while four writers are still meeting ENOSPC
            stop = threading.Event()
            final = Counter()
            writers = threading.Thread(target=run_writers, daemon=True,
                                       kwargs={"server": server, "first": 50_000, "acked": acked, "statuses": final,
                                               "refusals": 10_000, "stop": stop})
            writers.start()
            time.sleep(3.0)
            server.kill()
            stop.set()
            writers.join(120)
            statuses.update({k: v for k, v in final.items() if k != "UNAVAILABLE"})   # the kill itself
            assert statuses["INTERNAL"] == 0 and set(statuses) <= {"OK", "RESOURCE_EXHAUSTED"}, statuses
            filler.unlink()
            server.port = free_port()
            server.start()
            client = server.client()
            found = {m.memory_id for m in client.list_all(TENANT)}
            missing = [t for t, i in acked.items() if i not in found]
            assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:3]}"
            for t in list(acked)[:: max(1, len(acked) // 40)]:
                assert [h.memory.memory_id for h in client.search(TENANT, t, lexical_only=True).hits][:1] == [acked[t]]
            print(json.dumps({"disk_full": {"statuses": dict(statuses), "first_fill": full_first,
                                            "after_space_returned": dict(resumed), "acknowledged": len(acked),
                                            "present_after_sigkill_and_restart": len(acked) - len(missing)}}))
        finally:
            server.stop()
