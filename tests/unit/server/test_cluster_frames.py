"""The model hop of engram on Ray: plain TCP frames answered on the connection's own thread
(server/cluster/frames.py), and the forward passes that callers on many threads join (server/cluster/passes.py)."""

from __future__ import annotations

import socket
import threading
import time
from collections import deque

import numpy as np
import pytest

from server.cluster.direct import HopFailed, Target
from server.cluster.frames import TOKEN_BYTES, FrameClient, FrameServer
from server.cluster.passes import Passes, Waiting, next_requests


def test_a_frame_call_needs_the_servers_token_and_reports_a_failed_handler() -> None:
    seen: list[bytes] = []

    def handle(body: bytes) -> bytes:
        seen.append(body)
        if body == b"boom":
            raise ValueError("the handler failed")
        return body[::-1] * 3

    server = FrameServer(handle)
    target = server.start("127.0.0.1")
    try:
        client = FrameClient(target)
        assert client.call(b"abc", timeout=10) == b"cbacbacba"
        assert client.call(b"", timeout=10) == b""
        big = bytes(range(256)) * 20_000   # several MB: read in pieces
        assert client.call(big, timeout=10) == big[::-1] * 3
        with pytest.raises(HopFailed) as failed:
            client.call(b"boom", timeout=10)
        assert failed.value.code == "INTERNAL" and not failed.value.deadline
        assert client.call(b"xy", timeout=10) == b"yxyxyx"   # the connection still serves
        for token in ("0" * TOKEN_BYTES, "f" * (TOKEN_BYTES + 8)):
            with pytest.raises(HopFailed) as refused:
                FrameClient(Target(address=target.address, token=token)).call(b"nope", timeout=5)
            assert refused.value.code == "UNAVAILABLE"
        client.close()
    finally:
        server.stop()
    assert b"nope" not in seen   # refused callers never reached the handler


def test_a_frame_call_fails_on_its_deadline_and_when_the_server_is_gone() -> None:
    release = threading.Event()
    server = FrameServer(lambda body: (release.wait(5), body)[1])
    target = server.start("127.0.0.1")
    client = FrameClient(target)
    started = time.monotonic()
    with pytest.raises(HopFailed) as late:
        client.call(b"slow", timeout=0.2)
    assert late.value.deadline and time.monotonic() - started < 2
    release.set()
    assert client.call(b"ok", timeout=5) == b"ok"   # a new connection: the late one was closed
    server.stop()
    with pytest.raises(HopFailed) as gone:
        client.call(b"after", timeout=5)
    assert gone.value.code == "UNAVAILABLE" and gone.value.sent   # on a connection the server closed
    with pytest.raises(HopFailed) as refused:
        client.call(b"again", timeout=5)
    assert refused.value.code == "UNAVAILABLE" and not refused.value.sent   # no connection: it never left
    host, port = target.address.rsplit(":", 1)
    with socket.socket() as s:   # nothing listens there any more
        assert s.connect_ex((host, int(port))) != 0


def test_next_requests_takes_the_oldest_up_to_the_limit() -> None:
    queue = deque(Waiting([i], []) for i in range(5))
    assert [r.items for r in next_requests(queue, max_requests=3)] == [[0], [1], [2]]
    assert [r.items for r in next_requests(queue, max_requests=3)] == [[3], [4]]
    assert next_requests(queue, max_requests=3) == []


def test_callers_on_many_threads_join_passes_and_each_gets_its_own_rows() -> None:
    sizes: list[int] = []
    gate = threading.Event()

    def forward(requests: list[Waiting]) -> list[np.ndarray]:
        sizes.append(len(requests))
        gate.wait(5)   # the first pass holds until every other caller waits: they form the next pass together
        if any("bad" in r.items for r in requests):
            raise RuntimeError("a failed pass")
        return [np.asarray([[float(x)] for x in r.items], dtype=np.float32) for r in requests]

    passes = Passes(forward, max_requests=4)
    results: dict[int, object] = {}

    def caller(i: int, items: list[object]) -> None:
        try:
            results[i] = passes.run(items, [])
        except RuntimeError as exc:
            results[i] = exc

    first = threading.Thread(target=caller, args=(0, [0]))
    first.start()
    while not sizes:
        time.sleep(0.001)
    others = [threading.Thread(target=caller, args=(i, [i, i + 100])) for i in range(1, 7)]
    for t in others:
        t.start()
    while len(passes._queue) < 6:
        time.sleep(0.001)
    gate.set()
    for t in [first, *others]:
        t.join(10)
    assert sizes == [1, 4, 2]   # the first caller alone, then the six that waited meanwhile, 4 at most a pass
    assert results[0].tolist() == [[0.0]]   # type: ignore[attr-defined]
    for i in range(1, 7):
        assert results[i].tolist() == [[float(i)], [float(i + 100)]]   # type: ignore[attr-defined]
    assert not passes._leading and not passes._queue
    with pytest.raises(RuntimeError):
        passes.run(["bad"], [])   # a failed pass fails its own callers
    assert passes.run([5], []).tolist() == [[5.0]]   # and the next pass runs
