"""Per-tenant settings through the real server: min_salience set by the tenant's key or an admin, the server's
memory.min_salience for tenants that set nothing, bad updates refused whole, durable across a restart."""

from __future__ import annotations

import math
from pathlib import Path

import grpc
import pytest
from support import Client, start_server, status_of

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

# Salience ~0.002 each; distinct, so that none merges into another as a near-duplicate.
SMALL_TALK = ["Caroline: Thanks!", "Melanie: haha ok", "Caroline: Bye!", "Melanie: Thank you so much!",
              "Caroline: Cool, see you!", "Melanie: ok :)"]
FACT = "Caroline: I moved to Lisbon in March 2023 with my two dogs"   # salience ~0.89
C = grpc.StatusCode


def get(c: Client, tenant: str) -> spb.SettingsResponse:
    return c.memory.GetSettings(spb.GetSettingsRequest(tenant_id=tenant), metadata=c.metadata)


def update(c: Client, tenant: str, reset: tuple[str, ...] = (), **values: float) -> spb.SettingsResponse:
    request = spb.UpdateSettingsRequest(tenant_id=tenant, settings=spb.TenantSettings(**values), reset=list(reset))
    return c.memory.UpdateSettings(request, metadata=c.metadata)


def outcome(c: Client, tenant: str, text: str) -> tuple[int, int]:
    reply = c.write(tenant, text, type=pb.MEMORY_TYPE_EPISODIC)
    return reply.results[0].outcome, reply.skipped


def test_min_salience_per_tenant(tmp_path: Path, jvm: None, embedder) -> None:  # type: ignore[no-untyped-def]
    running = start_server(tmp_path / "data", embedder=embedder, memory={"min_salience": 0.05})
    try:
        admin = running.client()
        for tenant in ("a", "b"):
            admin.create_tenant(tenant)
        # CreateTenant's initial memories go through the same write path: the count is of those stored.
        created = admin.create_tenant("c", [pb.MemoryInput(content=SMALL_TALK[0]), pb.MemoryInput(content=FACT)])
        assert created.initial_memories == 1 and [m.content for m in admin.list_all("c")] == [FACT]
        own = running.client(admin.create_key(tenant_ids=["a"]))
        fresh = get(own, "a")
        assert not fresh.settings.HasField("min_salience")                 # nothing set: the server's option
        assert fresh.effective.min_salience == pytest.approx(0.05)

        # The tenant's own key opts out of the server-wide threshold; the other tenant still follows it.
        reply = update(own, "a", min_salience=0.0)
        assert reply.settings.HasField("min_salience") and reply.effective.min_salience == 0.0
        assert outcome(own, "a", SMALL_TALK[0]) == (spb.WRITE_OUTCOME_CREATED, 0)
        assert outcome(admin, "b", SMALL_TALK[0]) == (spb.WRITE_OUTCOME_SKIPPED, 1)
        assert status_of(lambda: update(own, "b", min_salience=0.0)) == C.PERMISSION_DENIED
        assert not get(admin, "b").settings.HasField("min_salience")

        # Bad updates: INVALID_ARGUMENT, and nothing changed (the setting and what writes do).
        before = get(own, "a")
        for bad in ({"min_salience": -0.1}, {"min_salience": 1.5}, {"min_salience": math.nan},
                    {"min_salience": math.inf}, {"reset": ("min_salienc",)},
                    {"reset": ("min_salience",), "min_salience": 0.2}, {}):
            assert status_of(lambda bad=bad: update(own, "a", **bad)) == C.INVALID_ARGUMENT, bad   # type: ignore[arg-type]
            assert get(own, "a") == before, bad
        assert outcome(own, "a", SMALL_TALK[1]) == (spb.WRITE_OUTCOME_CREATED, 0)
        assert status_of(lambda: update(admin, "ghost", min_salience=0.1)) == C.NOT_FOUND
        assert status_of(lambda: get(admin, "ghost")) == C.NOT_FOUND

        # An admin key sets a tenant's threshold too; a mixed Write reports how many it skipped.
        assert update(admin, "b", min_salience=0.2).effective.min_salience == pytest.approx(0.2)
        mixed = admin.write("b", SMALL_TALK[2], FACT, SMALL_TALK[3], type=pb.MEMORY_TYPE_EPISODIC)
        assert [r.outcome for r in mixed.results] == [spb.WRITE_OUTCOME_SKIPPED, spb.WRITE_OUTCOME_CREATED,
                                                      spb.WRITE_OUTCOME_SKIPPED]
        assert mixed.skipped == 2

        # Reset: back to the server's option.
        reset = update(own, "a", reset=("min_salience",))
        assert not reset.settings.HasField("min_salience") and reset.effective.min_salience == pytest.approx(0.05)
        assert outcome(own, "a", SMALL_TALK[4]) == (spb.WRITE_OUTCOME_SKIPPED, 1)
        update(own, "a", min_salience=0.0)
    finally:
        running.stop()

    # Durable: after a restart with another server-wide default, what each tenant set still holds.
    running = start_server(tmp_path / "data", embedder=embedder, memory={"min_salience": 0.5})
    try:
        admin = running.client()
        assert get(admin, "a").effective.min_salience == 0.0
        assert get(admin, "b").effective.min_salience == pytest.approx(0.2)
        assert outcome(admin, "a", SMALL_TALK[5]) == (spb.WRITE_OUTCOME_CREATED, 0)
        # A tenant deleted and created again starts with the server's options.
        admin.admin.DeleteTenant(spb.DeleteTenantRequest(tenant_id="a"), metadata=admin.metadata)
        admin.create_tenant("a")
        again = get(admin, "a")
        assert not again.settings.HasField("min_salience") and again.effective.min_salience == pytest.approx(0.5)
    finally:
        running.stop()
