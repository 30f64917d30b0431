"""The cheap path of a forwarded call on a TenantShard replica: it skips the executor hops only when they have
nothing to do (the tenant known with the edge's settings; the owner record not yet due, the log not fenced), and
every replica process gets the Serve settings that keep a request on the replica's own event loop."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("ray", reason="the cluster extra (requirements-cluster.txt) is not installed")
pytestmark = pytest.mark.slow   # make test-slow installs the cluster extra; make test does not

from server.cluster.deployments import (  # noqa: E402
    REPLICA_ENV, TenantShard, _Opened, actor_options, build_application)
from server.config import load_config  # noqa: E402
from server.tenants.catalog import Catalog  # noqa: E402


def _opened_log(*, fenced: bool = False) -> SimpleNamespace:
    return SimpleNamespace(objects=SimpleNamespace(fenced=fenced))


def test_owner_check_is_due_only_when_fenced_or_its_interval_passed() -> None:
    opened = _Opened(backend=None)
    assert not opened.due("t", every_s=1.0)   # not loaded here: nothing to check
    opened.logs["t"] = _opened_log()
    opened.checked_s["t"] = time.monotonic()
    assert not opened.due("t", every_s=1.0)
    assert opened.due("t", every_s=0.0)       # verify_owner_s 0: every call reads the owner record
    opened.checked_s["t"] = time.monotonic() - 2.0
    assert opened.due("t", every_s=1.0)
    opened.logs["t"] = _opened_log(fenced=True)
    opened.checked_s["t"] = time.monotonic()
    assert opened.due("t", every_s=60.0)      # a fenced write settles it at once


def test_a_tenant_is_known_only_with_the_edges_settings(tmp_path: Path) -> None:
    shard = SimpleNamespace(catalog=Catalog(tmp_path / "system"))   # what _known reads of a replica
    known = TenantShard.func_or_class._known
    try:
        assert not known(shard, "t", {})
        shard.catalog.create_tenant("t")
        assert known(shard, "t", {})
        assert not known(shard, "t", {"min_salience": 0.3})
        shard.catalog.update_settings("t", {"min_salience": 0.3}, [])
        assert known(shard, "t", {"min_salience": 0.3})
        assert not known(shard, "t", {})   # the edge reset it: through _ensure_tenant again
    finally:
        shard.catalog.close()


def test_every_replica_runs_user_code_on_its_own_loop() -> None:
    assert REPLICA_ENV == {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0"}
    options = actor_options(1.5)
    assert options["num_cpus"] == 1.5 and options["runtime_env"]["env_vars"] == REPLICA_ENV
    config = load_config(env={"ENGRAM_OBJECT_STORE__BUCKET": "b", "ENGRAM_MODELS__RERANKER": "tiny"})
    app = build_application(config)
    shard = app._bound_deployment
    models = [a for a in shard.init_args if hasattr(a, "_bound_deployment")]
    assert len(models) == 2   # the Encoder and the Reranker
    for deployment in (shard, *(m._bound_deployment for m in models)):
        assert deployment.ray_actor_options["runtime_env"]["env_vars"] == REPLICA_ENV
        assert deployment._deployment_config.logging_config["enable_access_log"] is False


def test_no_encoder_replicas_put_the_models_in_each_shard_replica() -> None:
    config = load_config(env={"ENGRAM_OBJECT_STORE__BUCKET": "b", "ENGRAM_MODELS__RERANKER": "tiny",
                              "ENGRAM_CLUSTER__ENCODER_REPLICAS": "0"})
    shard = build_application(config)._bound_deployment
    assert shard.name == "TenantShard"
    assert not [a for a in shard.init_args if hasattr(a, "_bound_deployment")]   # no Encoder, no Reranker


def test_a_replica_sweeps_the_owner_of_loaded_tenants_no_call_checked_oldest_first() -> None:
    from server.cluster import deployments

    opened = _Opened(backend=None)
    now = time.monotonic()
    names = [f"t{i}" for i in range(deployments.OWNER_SWEEP_TENANTS + 3)]
    for i, name in enumerate(names):
        opened.logs[name] = _opened_log()
        opened.checked_s[name] = now - 100 + i   # t0 checked longest ago
    opened.checked_s["busy"] = now               # a call checked it just now: not due
    opened.logs["busy"] = _opened_log()
    checked: list[str] = []

    def check(tenant_id: str) -> None:
        checked.append(tenant_id)
        if tenant_id == "t1":
            raise OSError("the bucket did not answer")   # one failed check does not stop the sweep

    replica = SimpleNamespace(
        opened=opened, config=SimpleNamespace(cluster=SimpleNamespace(verify_owner_s=1.0)), _check_owner=check,
        engine=SimpleNamespace(registry=SimpleNamespace(loaded=lambda: [
            SimpleNamespace(tenant_id=t) for t in [*reversed(names), "busy", "not-opened-here"]])))
    TenantShard.func_or_class._sweep_owners(replica)
    assert checked == names[:deployments.OWNER_SWEEP_TENANTS]


def _replica_with(write, registry) -> SimpleNamespace:  # type: ignore[no-untyped-def]
    """What TenantShard._call and _discard read of a replica: the tenant known, no owner check due."""
    import threading

    cls = TenantShard.func_or_class
    replica = SimpleNamespace(_create_lock=threading.Lock(), _moves={}, _discarding={},
                              engine=SimpleNamespace(write=write, registry=registry, write_pool=None),
                              opened=SimpleNamespace(due=lambda *a, **k: False),
                              config=SimpleNamespace(cluster=SimpleNamespace(verify_owner_s=60.0)),
                              _known=lambda *a: True)
    replica._moves_seen = lambda t: cls._moves_seen(replica, t)
    replica._discard = lambda t: cls._discard(replica, t)
    return replica


def test_a_call_that_takes_the_shard_while_a_discard_is_under_way_answers_moved() -> None:
    """The race the cluster's kill test met once: a discard counted, its shard not yet closed; a Write that starts
    then takes the shard, the discard closes it, and the Write fails on its closed Lucene index. That is a handoff
    (TenantMoved, UNAVAILABLE: retry), not a bug (INTERNAL)."""
    import asyncio
    import threading

    from server.cluster.deployments import Failure, TenantMoved
    from server.lexical.lucene import LexicalIndexClosedError

    release, closed = threading.Event(), threading.Event()

    def discard(tenant_id: str) -> bool:   # the registry's: waits for its gate, then closes the shard
        release.wait(10)
        closed.set()
        return True

    async def write(principal, tenant_id, *args, **kwargs):  # type: ignore[no-untyped-def]
        release.set()                                  # the discard goes on while the Write commits ...
        await asyncio.to_thread(closed.wait, 10)
        raise LexicalIndexClosedError("lexical index is closed")   # ... and closes what the Write holds

    replica = _replica_with(write, SimpleNamespace(discard=discard))
    discarding = threading.Thread(target=replica._discard, args=("t",))
    discarding.start()
    while not replica._discarding.get("t"):
        time.sleep(0.001)
    out = asyncio.run(TenantShard.func_or_class._call(replica, "write", None, "t", (), {}, None, "r1", {}))
    discarding.join(10)
    assert isinstance(out, Failure) and isinstance(out.error, TenantMoved)
    assert replica._moves == {"t": 1} and replica._discarding == {"t": 0}


def test_a_failure_with_no_discard_around_it_stays_a_bug() -> None:
    import asyncio

    async def write(principal, tenant_id, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug")

    replica = _replica_with(write, SimpleNamespace(discard=lambda t: True))
    with pytest.raises(RuntimeError, match="a bug"):
        asyncio.run(TenantShard.func_or_class._call(replica, "write", None, "t", (), {}, None, "r1", {}))
