"""Randomized tenant isolation: many keys (exact, prefix, admin) and look-alike tenants, random operations
of every tenant-scoped RPC with ids and query text taken from other tenants. The oracle is a hand-written
table of which key may touch which tenant, not the server's own ``covers``.

Asserted on every operation: a key outside its scope gets PERMISSION_DENIED and nothing changes; a key in
scope sees, changes and finds only that tenant's memories (foreign ids are "missing", foreign tokens find
nothing foreign). At the end each tenant holds exactly what the model says.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from support import Client, RunningServer, start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

C = grpc.StatusCode
TENANTS = ("acme", "acme2", "Acme", "acme-2", "acme/a", "acme/a/b", "a/b", "a/b/c", "a/bc", "a.b")
# Ids a client may send that must never name a tenant: Unicode and invisible look-alikes of the real ones.
NON_TENANTS = ("аcme", "ａcme", "acme\u200b", "ACME ", "acme/", "a/b/", "a//b", "acme\n")
KEYS: dict[str, dict[str, list[str]]] = {
    "exact-acme": {"tenant_ids": ["acme"]},
    "prefix-acme": {"tenant_prefixes": ["acme/"]},
    "prefix-a-b": {"tenant_prefixes": ["a/b/"]},
    "exact-a-b": {"tenant_ids": ["a/b"]},
    "case-Acme": {"tenant_ids": ["Acme"]},
    "mixed": {"tenant_ids": ["acme2", "a/bc"], "tenant_prefixes": ["acme/a/"]},
}
# The oracle, by hand: which tenants each key may touch (admin: all).
ALLOWED = {
    "exact-acme": {"acme"},
    "prefix-acme": {"acme/a", "acme/a/b"},
    "prefix-a-b": {"a/b/c"},
    "exact-a-b": {"a/b"},
    "case-Acme": {"Acme"},
    "mixed": {"acme2", "a/bc", "acme/a/b"},
    "admin": set(TENANTS),
}


@dataclass
class Model:
    live: dict[str, dict[str, str]] = field(default_factory=lambda: {t: {} for t in TENANTS})  # tenant → id → text
    ever: dict[str, set[str]] = field(default_factory=lambda: {t: set() for t in TENANTS})
    n: int = 0

    def owner(self, memory_id: str) -> str:
        return next(t for t, ids in self.ever.items() if memory_id in ids)


def marker(tenant: str) -> str:
    return "tn" + "".join(c if c.isalnum() else "x" for c in tenant).lower() + f"v{len(tenant)}"


class Isolation:
    def __init__(self, server: RunningServer, seed: int) -> None:
        admin = server.client()
        for tenant in TENANTS:
            admin.create_tenant(tenant)
        self.clients = {"admin": admin}
        for name, scope in KEYS.items():
            reply = admin.admin.CreateKey(spb.CreateKeyRequest(name=name, **scope), metadata=admin.metadata)
            self.clients[name] = server.client(reply.secret)
        self.model = Model()
        self.rng = random.Random(seed)
        self.counts: Counter[str] = Counter()
        self.ops: dict[str, Callable[[Client, str], object]] = {
            "write": self.write, "search": self.search, "get": self.get, "delete": self.delete, "list": self.list,
            "history": self.history, "audit": self.audit, "forget_dry_run": self.forget_dry_run,
            "confirm": self.confirm}

    # Each op returns the call's result; run() checks the status against the oracle first.
    def _foreign_ids(self, tenant: str, k: int = 3) -> list[str]:
        pool = sorted(i for t, ids in self.model.ever.items() if t != tenant for i in ids)
        return self.rng.sample(pool, min(k, len(pool))) or ["m_" + "0" * 20]  # every op makes its call

    def _own_ids(self, tenant: str, k: int = 2) -> list[str]:
        pool = sorted(self.model.live[tenant])
        return self.rng.sample(pool, min(k, len(pool)))

    def write(self, client: Client, tenant: str) -> object:
        self.model.n += 1
        text = f"{marker(tenant)} note{self.model.n} {self.rng.choice(['budget', 'deploy', 'tea', 'allergy'])}"
        reply = client.write(tenant, text)
        memory_id = reply.results[0].memory_id
        if reply.results[0].outcome == spb.WRITE_OUTCOME_CREATED:
            self.model.live[tenant][memory_id] = text
            self.model.ever[tenant].add(memory_id)
        assert memory_id in self.model.live[tenant], "a write merged into another tenant's memory"
        return reply

    def _assert_own(self, tenant: str, memories: list[pb.Memory]) -> None:
        for m in memories:
            assert m.memory_id in self.model.ever[tenant], f"{tenant} saw {m.memory_id} of another tenant"
            assert m.content.startswith(marker(tenant) + " "), (tenant, m.content)

    def search(self, client: Client, tenant: str) -> object:
        other = self.rng.choice([t for t in TENANTS if t != tenant])
        text = self.rng.choice([marker(other), f"{marker(other)} budget", "budget deploy tea allergy"])
        hits = client.search(tenant, text, top_k=20, include_history=True, include_pending=True).hits
        self._assert_own(tenant, [h.memory for h in hits])
        return hits

    def get(self, client: Client, tenant: str) -> object:
        foreign, own = self._foreign_ids(tenant), self._own_ids(tenant)
        reply = client.get(tenant, *(foreign + own))
        self._assert_own(tenant, list(reply.memories))
        assert sorted(reply.missing) == sorted(foreign)
        return reply

    def delete(self, client: Client, tenant: str) -> object:
        foreign = self._foreign_ids(tenant)
        own = self._own_ids(tenant, 1) if self.rng.random() < 0.5 else []
        reply = client.delete(tenant, *(foreign + own))
        assert reply.deleted == len(own) and sorted(reply.missing) == sorted(foreign)
        for memory_id in own:
            del self.model.live[tenant][memory_id]
        return reply

    def list(self, client: Client, tenant: str) -> object:
        memories = client.list_all(tenant)
        self._assert_own(tenant, memories)
        assert sorted(m.memory_id for m in memories) == sorted(self.model.live[tenant])
        return memories

    def history(self, client: Client, tenant: str) -> object:
        foreign = self._foreign_ids(tenant, 1)
        request = spb.HistoryRequest(tenant_id=tenant, memory_id=foreign[0])
        try:
            reply = client.memory.History(request, metadata=client.metadata)
        except grpc.RpcError as exc:
            if exc.code() != C.NOT_FOUND:
                raise
            return None
        self._assert_own(tenant, list(reply.versions))
        return reply

    def audit(self, client: Client, tenant: str) -> object:
        request = spb.AuditRequest(tenant_id=tenant, page_size=100,
                                   memory_id=self.rng.choice(self._foreign_ids(tenant, 1) or [""]))
        reply = client.memory.Audit(request, metadata=client.metadata)
        for entry in reply.entries:
            for ref in entry.refs:
                for memory_id in (ref.memory_id, ref.related_id):
                    assert not memory_id or memory_id in self.model.ever[tenant], (tenant, memory_id)
        return reply

    def forget_dry_run(self, client: Client, tenant: str) -> object:
        request = spb.ForgetRequest(tenant_id=tenant, all=True, dry_run=True, mode=spb.FORGET_MODE_DELETE)
        reply = client.memory.Forget(request, metadata=client.metadata)
        assert set(reply.memory_ids) <= set(self.model.live[tenant])
        return reply

    def confirm(self, client: Client, tenant: str) -> object:
        foreign = self._foreign_ids(tenant, 1)
        try:
            reply = client.memory.Confirm(spb.ConfirmRequest(tenant_id=tenant, memory_ids=foreign),
                                          metadata=client.metadata)
        except grpc.RpcError as exc:
            if exc.code() not in (C.NOT_FOUND, C.INVALID_ARGUMENT, C.FAILED_PRECONDITION):
                raise
            return None
        self._assert_own(tenant, [r.memory for r in reply.results])
        return reply

    def step(self) -> None:
        key = self.rng.choice(sorted(self.clients))
        client = self.clients[key]
        op = self.rng.choices(list(self.ops), weights=[25, 20, 12, 10, 8, 7, 6, 6, 6])[0]
        if self.rng.random() < 0.05:
            bad = self.rng.choice(NON_TENANTS)
            probes: dict[str, Callable[[], object]] = {
                "write": lambda: client.write(bad, "look-alike write"), "search": lambda: client.search(bad, "tea"),
                "get": lambda: client.get(bad, "m_x"), "delete": lambda: client.delete(bad, "m_x"),
                "list": lambda: client.list_all(bad)}
            try:
                probes.get(op, probes["search"])()
            except grpc.RpcError as exc:
                assert exc.code() == C.INVALID_ARGUMENT, (key, op, bad, exc.code())
            else:
                raise AssertionError(f"{op} accepted tenant id {bad!r}")
            self.counts["look-alike ids refused"] += 1
            return
        tenant = self.rng.choice(TENANTS)
        allowed = tenant in ALLOWED[key]
        try:
            self.ops[op](client, tenant)
        except grpc.RpcError as exc:
            assert not allowed and exc.code() == C.PERMISSION_DENIED, (key, op, tenant, exc.code(), exc.details())
            self.counts["denied"] += 1
        else:
            assert allowed, f"key {key} did {op} on tenant {tenant}"
            self.counts["allowed"] += 1
        self.counts[op] += 1

    def final_check(self) -> None:
        admin = self.clients["admin"]
        for tenant in TENANTS:
            stored = {m.memory_id: m.content for m in admin.list_all(tenant)}
            assert stored == self.model.live[tenant], tenant


def run_isolation(server: RunningServer, *, ops: int, seed: int) -> Counter[str]:
    iso = Isolation(server, seed)
    for _ in range(ops):
        iso.step()
    iso.final_check()
    return iso.counts


def test_random_operations_never_cross_a_tenant_boundary(server: RunningServer) -> None:
    counts = run_isolation(server, ops=300, seed=11)
    assert counts["denied"] > 40 and counts["allowed"] > 40 and counts["look-alike ids refused"] > 3, counts


@pytest.mark.slow
def test_ten_thousand_random_operations_never_cross_a_tenant_boundary(tmp_path: Path, jvm: None, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder)
    try:
        counts = run_isolation(running, ops=10_000, seed=2026)
    finally:
        running.stop()
    assert counts["denied"] > 1000 and counts["allowed"] > 1000, counts
