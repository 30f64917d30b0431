"""Overload through the real server: a full queue answers RESOURCE_EXHAUSTED at once (not after waiting),
and a request whose client gave up is dropped before any model work."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from support import RunningServer, start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

C = grpc.StatusCode
LONG = " ".join(["the quarterly planning memo covers budget, hiring, travel and the deploy calendar"] * 12)


@pytest.fixture(scope="module")
def small_queue(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("overload") / "data", embedder=embedder,
                           batching={"queue_capacity": 4, "max_batch_requests": 1})   # one request: nothing waits
    running.client().create_tenant("load")
    running.client().write("load", "User prefers tea over coffee", "The deploy window is Tuesday")
    yield running
    running.stop()


def _fire(client: Any, requests: list[tuple[str, object]], timeout: float) -> list[tuple[C, float]]:
    """Starts every call at once; returns (status, seconds until it finished) per call."""
    started = time.monotonic()
    done: dict[int, float] = {}
    futures = []
    for i, (rpc, request) in enumerate(requests):
        future = getattr(client.memory, rpc).future(request, metadata=client.metadata, timeout=timeout)
        future.add_done_callback(lambda _f, i=i: done.__setitem__(i, time.monotonic() - started))
        futures.append(future)
    out = []
    for i, future in enumerate(futures):
        try:
            future.result()
            code = C.OK
        except grpc.RpcError as exc:
            code = exc.code()
        out.append((code, done.get(i, time.monotonic() - started)))
    return out


def test_full_queue_answers_resource_exhausted_fast(small_queue: RunningServer) -> None:
    client = small_queue.client()
    searches = [("Search", spb.SearchRequest(tenant_id="load", queries=[pb.SearchQuery(text=f"{LONG} {i}")]))
                for i in range(48)]
    results = _fire(client, searches, timeout=60)
    codes = Counter(code for code, _ in results)
    assert set(codes) <= {C.OK, C.RESOURCE_EXHAUSTED}, codes
    assert codes[C.RESOURCE_EXHAUSTED] >= 10 and codes[C.OK] >= 4, codes
    rejected = sorted(t for code, t in results if code == C.RESOURCE_EXHAUSTED)
    served = sorted(t for code, t in results if code == C.OK)
    # Rejections do not wait for the queue: the slowest rejection beats the slowest served call by far.
    assert rejected[-1] < served[-1] / 2, (rejected[-1], served[-1])
    assert small_queue.app.engine.search_batcher.stats.rejected == codes[C.RESOURCE_EXHAUSTED]
    # Once the burst is over the server serves again.
    assert client.search("load", "tea").hits


def test_requests_whose_deadline_passed_in_the_queue_are_not_computed(small_queue: RunningServer) -> None:
    client = small_queue.client()
    engine = small_queue.app.engine
    before = engine.write_batcher.stats.items
    slow = [("Write", spb.WriteRequest(tenant_id="load", memories=[pb.MemoryInput(content=f"{LONG} slow {i} {j}")
                                                                  for j in range(8)])) for i in range(3)]
    hurried = [("Write", spb.WriteRequest(tenant_id="load", memories=[pb.MemoryInput(content=f"hurried note {i}")]))
               for i in range(1)]
    started = time.monotonic()
    futures = [getattr(client.memory, rpc).future(r, metadata=client.metadata, timeout=120) for rpc, r in slow]
    time.sleep(0.05)  # the slow writes are queued or running
    quick = _fire(client, hurried, timeout=0.1)
    for f in futures:
        f.result()
    assert quick[0][0] == C.DEADLINE_EXCEEDED and quick[0][1] < 1.0, quick
    assert time.monotonic() - started > 0.1  # the slow writes did outlast the hurried deadline
    stats = engine.write_batcher.stats
    assert stats.dropped >= 1, stats                              # dropped before the embedding pass
    assert stats.items - before == len(slow), stats               # only the slow writes reached the model
    assert "hurried note 0" not in [m.content for m in client.list_all("load")]
