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
