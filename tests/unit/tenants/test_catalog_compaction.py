"""The catalog's log is compacted like a tenant's: past its threshold it is rewritten as the live tenants,
settings and keys (locally, and in a bucket as a base and a manifest swap), and a reopen finds the same state:
dropped tenants stay dropped, settings and key scopes as set, rotated and revoked keys as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.errors import Unauthenticated
from server.store.object_wal import ObjectLogBackend
from server.tenants.catalog import Catalog
from tests.unit.store.s3_support import mocked, new_store


def churn(catalog: Catalog) -> dict[str, str]:
    """Many records that mostly cancel out; returns the secrets that must still work by name."""
    secrets = {}
    for i in range(60):
        catalog.create_tenant(f"t{i}")
        catalog.update_settings(f"t{i}", {"min_salience": 0.1 * (i % 5)}, [])
        if i % 3:
            catalog.drop_tenant(f"t{i}")
    key_id, secret = catalog.create_key(name="k", tenant_ids=["t0"], prefixes=["acme/"], admin=False)
    for _ in range(20):
        secret = catalog.rotate_key(key_id)
    secrets["rotated"] = secret
    gone_id, gone = catalog.create_key(name="gone", tenant_ids=["t3"], prefixes=[], admin=False)
    catalog.revoke_key(gone_id)
    secrets["revoked"] = gone
    return secrets


def state(catalog: Catalog) -> tuple:
    return (catalog.tenants(), {t: catalog.settings(t) for t in catalog.tenants()})


def check_reopened(catalog: Catalog, reopened: Catalog, secrets: dict[str, str]) -> None:
    assert state(reopened) == state(catalog)
    assert reopened.tenants() == sorted(f"t{i}" for i in range(0, 60, 3))
    scope = reopened.authenticate(secrets["rotated"])
    assert scope.tenant_ids == frozenset({"t0"}) and scope.tenant_prefixes == ("acme/",)
    with pytest.raises(Unauthenticated):
        reopened.authenticate(secrets["revoked"])


def test_a_local_catalog_compacts_and_reopens_the_same(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path, compact_min_bytes=4096)
    secrets = churn(catalog)
    assert catalog.compactions >= 1
    size = catalog._wal.size_bytes()
    assert size < 4096 * 2
    check_reopened(catalog, Catalog(tmp_path), secrets)


def test_a_catalog_in_a_bucket_compacts_and_a_fresh_disk_reads_it_back(tmp_path: Path) -> None:
    with mocked():
        store, _ = new_store()
        backend = ObjectLogBackend(store=store, owner_id="edge", grace_s=0.0)
        catalog = Catalog(tmp_path / "a", open_log=backend.catalog_opener(), compact_min_bytes=4096)
        secrets = churn(catalog)
        assert catalog.compactions >= 1
        assert store.get("system/catalog/manifest") is not None        # a base stands for the old segments
        segments = store.keys("system/catalog/wal/")
        assert len(segments) < 60                                       # superseded ones deleted (grace 0)
        check_reopened(catalog, Catalog(tmp_path / "b", open_log=backend.catalog_opener()), secrets)
