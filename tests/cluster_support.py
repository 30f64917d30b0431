"""engram on Ray Serve for the integration tests: a local Ray cluster of two raylets on this machine
(``ray.cluster_utils.Cluster``), a real S3 server (SeaweedFS ``weed mini``) with a bucket, and engram's gRPC
edge over the deployed application, served in-process like :func:`support.start_server`'s server.

The fixtures are module-scoped; a test module imports the ones it uses (``from cluster_support import weed,
ray_cluster``). Importing this module needs ray (``pytest.importorskip`` it first)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_handlers import kept_fault_handlers
from s3_server import Weed
from support import ADMIN_KEY, RunningServer

from server.config import load_config
from server.store.s3 import make_client

BUCKET = "engram-cluster"


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Weed]:
    server = Weed(tmp_path_factory.mktemp("weed"))
    server.start()
    make_client(endpoint=server.endpoint, region="us-east-1", access_key="any", secret_key="any",
                timeout_s=5).create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "any")      # weed mini accepts any credentials; the
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "any")  # raylets and replicas inherit this environment
    started = time.perf_counter()
    # ray.init installs the core worker's fault handlers over whatever the process had: in a module after the
    # first, the JVM that an earlier module's edge started. HotSpot needs its SIGSEGV handler for routine faults,
    # so the fixture keeps the handlers it found, across ray.init here and ray.shutdown below.
    with kept_fault_handlers():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4})
        cluster.add_node(num_cpus=4)          # a second raylet: two "nodes" on this machine
        ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    print(f"\nray cluster of 2 raylets up in {time.perf_counter() - started:.1f}s")
    yield cluster
    from ray import serve

    with kept_fault_handlers():   # ray.shutdown resets SIGSEGV to SIG_DFL
        serve.shutdown()
        ray.shutdown()
        cluster.shutdown()


def cluster_config(data_dir: Path, weed: Weed, *, models: dict[str, Any], prefix: str = "", **overrides: Any) -> Any:
    """The config of an edge and its application: every log in the fixture's bucket (under ``prefix``), two
    TenantShard replicas; ``overrides``: other sections, as for :func:`support.start_server`."""
    cluster = {"replicas": 2, "shard_cpus": 1.0, "encoder_cpus": 1.0, "verify_owner_s": 0.5,
               **overrides.pop("cluster", {})}
    return load_config(env={}, overrides={
        "listen": "127.0.0.1:0", "data_dir": data_dir, "admin_key": ADMIN_KEY, "lucene_commit_interval_s": 0.5,
        "models": {"device": "cpu", "cpu_threads": 1, **models},
        "object_store": {"bucket": BUCKET, "endpoint": weed.endpoint, "prefix": prefix, "timeout_s": 3.0,
                         "attempts": 3},
        "cluster": cluster, **overrides})


def start_edge(config: Any) -> RunningServer:
    """Deploys the application (``config.cluster.app_name``) and serves the edge on its own event loop thread."""
    from server.cluster.ingress import build_cluster_app

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="engram-edge-loop", daemon=True)
    thread.start()

    async def build() -> Any:
        app = await build_cluster_app(config)
        await app.start()
        return app

    started = time.perf_counter()
    app = asyncio.run_coroutine_threadsafe(build(), loop).result(600)
    print(f"serve application deployed and edge up in {time.perf_counter() - started:.1f}s")
    return RunningServer(app=app, loop=loop, thread=thread, data_dir=config.data_dir)  # type: ignore[arg-type]
