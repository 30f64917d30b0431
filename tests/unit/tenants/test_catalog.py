from __future__ import annotations

from pathlib import Path

import pytest

from server.errors import AlreadyExists, InvalidArgument, Unauthenticated
from server.tenants.catalog import Catalog, validate_tenant_id


@pytest.mark.parametrize("good", ["a", "acme", "acme/alice", "A.b_c-d/e1", "x" * 128])
def test_valid_tenant_ids(good: str) -> None:
    assert validate_tenant_id(good) == good


@pytest.mark.parametrize("bad", ["", "/a", "a/", "a//b", "../a", "a/../b", "a b", "ａcme", "a\x00", "x" * 129, "-a"])
def test_invalid_tenant_ids(bad: str) -> None:
    with pytest.raises(InvalidArgument):
        validate_tenant_id(bad)


def test_keys_are_hashed_scoped_revocable_and_survive_restart(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    admin_secret = catalog.ensure_admin_key("")
    assert admin_secret and catalog.ensure_admin_key("") is None
    key_id, secret = catalog.create_key(name="acme", tenant_ids=["globex"], prefixes=["acme/"], admin=False)
    catalog.create_tenant("acme/a")
    with pytest.raises(AlreadyExists):
        catalog.create_tenant("acme/a")
    catalog.close()
    assert secret not in (tmp_path / "catalog.wal").read_text(errors="replace")
    catalog = Catalog(tmp_path)
    scope = catalog.authenticate(secret)
    assert scope.covers("acme/a") and scope.covers("globex")
    assert not scope.covers("acme2/a") and not scope.covers("acme") and not scope.covers("globex2")
    assert catalog.authenticate(admin_secret).admin
    catalog.revoke_key(key_id)
    with pytest.raises(Unauthenticated):
        catalog.authenticate(secret)
    with pytest.raises(Unauthenticated):
        catalog.authenticate(secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert catalog.tenants() == ["acme/a"]


def test_configured_admin_key(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    assert catalog.ensure_admin_key("a-configured-admin-key") is None
    assert catalog.authenticate("a-configured-admin-key").admin
    with pytest.raises(Unauthenticated):
        catalog.authenticate("another-key-of-some-length")
