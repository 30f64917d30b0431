"""Index tiers and tenant lifecycle through the real server: a low promotion threshold and a tiny memory
budget, so a tenant is promoted to IVF, evicted, reloaded from its snapshot and restarted — and no
deleted, superseded or expired memory ever comes back."""

from __future__ import annotations

import random
import time

import pytest
from support import start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.index.tiers import TierRules

SUBJECTS = ["the user", "Priya", "the team", "our landlord", "the dentist", "Marco", "the auditor", "my sister"]
VERBS = ["prefers", "booked", "mentioned", "cancelled", "reviewed", "ordered", "scheduled", "forgot"]
OBJECTS = ["a window seat", "the quarterly budget", "oat milk", "a trip to Lisbon", "the Rust workshop",
           "a standing desk", "the kickoff meeting", "a dentist appointment", "the invoice", "green tea"]
WHEN = ["on Monday", "last spring", "after lunch", "in March", "before the launch", "every Friday"]

OVERRIDES = {"rules": TierRules(promote_at=500, codes="Flat", nprobe=32, ef_search=64), "evict_idle_s": 0.0,
             "tenants": {"memory_budget_mb": 1}, "memory": {"dedupe_cosine": 1.01}}


def filler(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)} "
            f"(note {i}, ref {rng.randrange(10**6):06d})" for i in range(n)]


def stats(client, tenant_id: str = "") -> spb.StatsResponse:  # type: ignore[no-untyped-def]
    return client.admin.Stats(spb.StatsRequest(tenant_id=tenant_id), metadata=client.metadata)


def wait_for_tier(client, tenant_id: str, tier: str, timeout_s: float = 90.0) -> spb.TenantStats:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        t = stats(client, tenant_id).tenants[0]
        if t.dense_tier == tier and t.state == "LOADED":
            return t
        time.sleep(0.2)
    raise AssertionError(f"{tenant_id} never reached tier {tier}: {stats(client, tenant_id)}")


PROBES = ["what is the quokka password?", "narwhal code", "axolotl token value"]


def assert_nothing_forbidden(client, tenant_id: str, forbidden: dict[str, str], wanted: str) -> None:  # type: ignore[no-untyped-def]
    seen: set[str] = set()
    for text in PROBES:
        for mode in ({}, {"dense_only": True}, {"lexical_only": True}):
            hits = client.search(tenant_id, text, top_k=20, **mode).hits
            back = [forbidden[h.memory.memory_id] for h in hits if h.memory.memory_id in forbidden]
            assert not back, f"{back} came back for {text!r} {mode}"
            seen |= {h.memory.memory_id for h in hits}
    assert wanted in seen, "the live replacement must still be found"


def test_no_dead_memory_returns_across_promotion_eviction_and_restart(tmp_path, jvm, embedder) -> None:  # type: ignore[no-untyped-def]
    server = start_server(tmp_path / "data", embedder=embedder, **OVERRIDES)
    client = server.client()
    big, other = "scale/big", "scale/other"
    client.create_tenant(big)
    client.create_tenant(other)
    texts = filler(560)
    for start in range(0, 400, 200):
        client.write(big, *texts[start:start + 200])
    deleted = client.write(big, "The quokka password is 1111").results[0].memory_id
    old = client.write(big, pb.MemoryInput(content="The narwhal code is 2222", key="narwhal-code")).results[0]
    new = client.write(big, pb.MemoryInput(content="The narwhal code is 3333", key="narwhal-code")).results[0]
    assert old.memory_id in new.superseded
    expires_at_ms = int(time.time() * 1000) + 1500
    expiring = client.write(big, pb.MemoryInput(content="The axolotl token is 4444",
                                                expires_at_ms=expires_at_ms)).results[0].memory_id
    client.delete(big, deleted)
    assert stats(client, big).tenants[0].dense_tier == "flat"
    client.write(big, *texts[400:])   # crosses promote_at: promotion runs in the background
    forbidden = {deleted: "deleted", old.memory_id: "superseded", expiring: "expired"}
    wait_for_tier(client, big, "ivf")
    time.sleep(max(0.0, expires_at_ms / 1000 - time.time() + 0.1))   # the expiry has passed before any check
    assert_nothing_forbidden(client, big, forbidden, new.memory_id)

    # A second tenant pushes the 1 MB budget over: the big one is flushed, snapshotted and unloaded.
    client.write(other, "Other tenant's only memory")
    s = stats(client)
    assert s.evictions >= 1 and big not in {t.tenant_id for t in s.tenants}
    assert stats(client, big).tenants[0].state == "UNLOADED"
    assert_nothing_forbidden(client, big, forbidden, new.memory_id)   # reloads from the snapshot
    reloaded = stats(client, big).tenants[0]
    assert reloaded.dense_tier == "ivf" and reloaded.state == "LOADED" and reloaded.memories == 563   # the superseded one stays (history)

    server.stop()
    server = start_server(tmp_path / "data", embedder=embedder, **OVERRIDES)
    client = server.client()
    try:
        assert_nothing_forbidden(client, big, forbidden, new.memory_id)
        again = stats(client, big).tenants[0]
        assert again.dense_tier == "ivf" and again.state == "LOADED"   # from the snapshot: no rebuild
    finally:
        server.stop()
