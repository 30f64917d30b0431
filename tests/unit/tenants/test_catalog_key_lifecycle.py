"""Catalog key lifecycle: revocation and rotation are durable, and scopes cannot reach look-alike tenants."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.errors import InvalidArgument, NotFound, Unauthenticated
from server.tenants.catalog import ADMIN_KEY_ID, Catalog, validate_tenant_id


def test_rotation_keeps_scope_and_revocation_survives_reopen(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    key_id, old = catalog.create_key(name="k", tenant_ids=["globex"], prefixes=["acme/"], admin=False)
    new = catalog.rotate_key(key_id)
    with pytest.raises(Unauthenticated):
        catalog.authenticate(old)
    scope = catalog.authenticate(new)
    assert scope.key_id == key_id and scope.covers("acme/x") and scope.covers("globex") and not scope.covers("acme2")
    catalog.close()
    reopened = Catalog(tmp_path)
    assert reopened.authenticate(new).key_id == key_id
    reopened.revoke_key(key_id)
    reopened.revoke_key(key_id)  # idempotent
    with pytest.raises(NotFound):
        reopened.rotate_key(key_id)
    reopened.close()
    again = Catalog(tmp_path)
    with pytest.raises(Unauthenticated):
        again.authenticate(new)
    again.close()


def test_bootstrap_admin_key_and_bad_ids_are_refused(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    catalog.ensure_admin_key("a-configured-admin-key-0123")
    for key_id in (ADMIN_KEY_ID, "", "XYZ", "0123456789ABCDEF"):
        with pytest.raises(InvalidArgument):
            catalog.revoke_key(key_id)
        with pytest.raises(InvalidArgument):
            catalog.rotate_key(key_id)
    with pytest.raises(NotFound):
        catalog.revoke_key("0123456789abcdef")
    assert catalog.authenticate("a-configured-admin-key-0123").admin
    catalog.close()


@pytest.mark.parametrize("prefix", ["acme", "a/b", "acme//", "acme/\n"])
def test_prefixes_must_end_with_a_slash(tmp_path: Path, prefix: str) -> None:
    catalog = Catalog(tmp_path)
    with pytest.raises(InvalidArgument):
        catalog.create_key(name="k", tenant_ids=[], prefixes=[prefix], admin=False)
    catalog.close()


@pytest.mark.parametrize("tenant_id", ["acme\n", "acme/\n", "аcme", "acme\u200b", "a//b", "acme/"])
def test_tenant_ids_match_whole(tenant_id: str) -> None:
    with pytest.raises(InvalidArgument):
        validate_tenant_id(tenant_id)
