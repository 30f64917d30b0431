"""Soak (slow): a server subprocess under steady mixed load for SOAK_SECONDS seconds (default 600):
writes with a sliding delete window (so the data size is steady), searches, hostile requests and bursts
that overflow the queue. Asserts flat memory (RSS) and no status other than the intended ones.

Short run: ``SOAK_SECONDS=60 .venv/bin/python -m pytest -m slow tests/reliability/test_soak.py``; set
SOAK_OUT=path.json to keep the RSS samples and status counts.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from reliability.proc import ServerProcess
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

C = grpc.StatusCode
WORDS = "budget deploy tea coffee allergy peanut river ledger harbor meadow orbit quartz velvet walnut".split()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Soak:
    def __init__(self, server: ServerProcess, duration_s: float) -> None:
        self.server = server
        self.end = time.monotonic() + duration_s
        self.codes: dict[str, Counter[str]] = {"writer": Counter(), "searcher": Counter(), "hostile": Counter(),
                                               "burst": Counter()}
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def _count(self, role: str, fn: Callable[[], object]) -> None:
        try:
            fn()
            code = C.OK
        except grpc.RpcError as exc:
            code = exc.code()
        with self.lock:
            self.codes[role][code.name] += 1

    def writer(self) -> None:
        client, rng, window = self.server.client(), random.Random(1), []
        n = 0
        while time.monotonic() < self.end:
            n += 1
            text = f"soak note {n} " + " ".join(rng.sample(WORDS, 6))
            try:
                window.append(client.write("soak", text).results[0].memory_id)
                self.codes["writer"]["OK"] += 1
            except grpc.RpcError as exc:
                self.codes["writer"][exc.code().name] += 1
            if len(window) > 300:
                self._count("writer", lambda: client.delete("soak", *window[:20]))
                del window[:20]

    def searcher(self) -> None:
        client, rng = self.server.client(), random.Random(2)
        while time.monotonic() < self.end:
            self._count("searcher", lambda: client.search("soak", " ".join(rng.sample(WORDS, 3)), top_k=10))

    def hostile(self) -> None:
        client, rng = self.server.client(), random.Random(3)
        bad = [lambda: client.write("soak", ""), lambda: client.search("soak", "x", top_k=-1),
               lambda: client.get("soak", "m_\x00"), lambda: client.write("аcme", "look-alike")]
        while time.monotonic() < self.end:
            self._count("hostile", rng.choice(bad))
            if rng.random() < 0.02:  # a burst that overflows the queue
                futures = [client.memory.Search.future(
                    spb.SearchRequest(tenant_id="soak", queries=[pb.SearchQuery(text=f"burst {i} {WORDS[i % 14]}")]),
                    metadata=client.metadata, timeout=60) for i in range(64)]
                for f in futures:
                    self._count("burst", f.result)
            time.sleep(0.05)


def run_soak(tmp_path: Path, duration_s: float) -> dict[str, object]:
    server = ServerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "server.log",
                           env={"ENGRAM_BATCHING__QUEUE_CAPACITY": "16"}).start()
    try:
        server.client().create_tenant("soak")
        soak = Soak(server, duration_s)
        threads = [threading.Thread(target=getattr(soak, role)) for role in ("writer", "searcher", "hostile")]
        for t in threads:
            t.start()
        samples: list[tuple[float, int]] = []
        started = time.monotonic()
        assert server.proc is not None
        while any(t.is_alive() for t in threads):
            samples.append((time.monotonic() - started, rss_bytes(server.proc.pid)))
            time.sleep(2.0)
        for t in threads:
            t.join()
        exit_code = server.terminate()
    finally:
        server.stop()
    return {"duration_s": duration_s, "exit_code": exit_code, "rss": samples,
            "codes": {role: dict(c) for role, c in soak.codes.items()}}


@pytest.mark.slow
def test_soak_memory_is_flat_and_only_intended_errors(tmp_path: Path) -> None:
    duration_s = float(os.environ.get("SOAK_SECONDS", "600"))
    result = run_soak(tmp_path, duration_s)
    if os.environ.get("SOAK_OUT"):
        Path(os.environ["SOAK_OUT"]).write_text(json.dumps(result, indent=1))
    codes = result["codes"]
    assert result["exit_code"] == 0
    assert set(codes["writer"]) == {"OK"}, codes  # type: ignore[index]
    assert set(codes["searcher"]) <= {"OK", "RESOURCE_EXHAUSTED"}, codes  # a burst may fill the queue
    assert set(codes["hostile"]) == {"INVALID_ARGUMENT"}, codes  # type: ignore[index]
    assert set(codes["burst"]) <= {"OK", "RESOURCE_EXHAUSTED"}, codes  # type: ignore[index]
    rss = result["rss"]
    n = len(rss)  # type: ignore[arg-type]
    warm = [b for _, b in rss[n // 4: n // 2]]  # type: ignore[index]
    late = [b for _, b in rss[3 * n // 4:]]  # type: ignore[index]
    assert statistics.median(late) <= statistics.median(warm) * 1.10 + 64 * 2**20, (warm, late)
