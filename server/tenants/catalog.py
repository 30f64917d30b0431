"""The system catalog: which tenants exist and which keys may touch them, durable in one log.

Keys are ``egk_<key id>_<secret>``; only a SHA-256 of the whole key is kept. A key covers tenant ids
exactly or by prefix (``acme/``), or everything when it is an admin key.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from server.domain import KeyScope
from server.errors import AlreadyExists, InvalidArgument, NotFound, Unauthenticated
from server.store.durable_log import CATALOG_FILE, LogOpener, TenantLog
from server.store.wal import WriteAheadLog
from server.tenants.settings import TenantSettings

log = logging.getLogger(__name__)

TENANT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*(/[A-Za-z0-9][A-Za-z0-9._\-]*)*$")
KEY_RE = re.compile(r"^egk_([0-9a-f]{16})_([A-Za-z0-9_\-]{20,128})$")
PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/]*$")
ADMIN_KEY_ID = "0000000000000000"
KEY_ID_RE = re.compile(r"^[0-9a-f]{16}$")


MAX_TENANT_ID_LEN = 128   # characters; every stored key scope and catalog record holds ids within it


def validate_tenant_id(tenant_id: str, *, max_len: int = MAX_TENANT_ID_LEN) -> str:
    if not tenant_id:
        raise InvalidArgument("tenant_id is required")
    if len(tenant_id) > max_len:
        raise InvalidArgument(f"tenant_id is longer than {max_len} characters")
    if not TENANT_ID_RE.fullmatch(tenant_id) or ".." in tenant_id:
        raise InvalidArgument(
            "tenant_id may hold only ASCII letters, digits, '.', '_', '-' and '/'-separated segments "
            "that start with a letter or digit")
    return tenant_id


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class _StoredKey:
    scope: KeyScope
    digest: str
    revoked: bool = False


# The catalog's log is compacted (rewritten as one record per live tenant, setting and key) once it reaches
# this size and twice its size after the last compaction: dropped tenants, settings updates and rotated keys
# leave records behind that a long-lived server would otherwise replay at every start.
CATALOG_COMPACT_MIN_BYTES = 1 << 20


class Catalog:
    def __init__(self, directory: Path, *, open_log: LogOpener | None = None,
                 compact_min_bytes: int = CATALOG_COMPACT_MIN_BYTES) -> None:
        """``open_log``: where the catalog's log lives (``ObjectLogBackend.catalog_opener()``: in the bucket,
        ``directory / CATALOG_FILE`` its cache); default that local file."""
        directory.mkdir(parents=True, exist_ok=True)
        self.compact_min_bytes = compact_min_bytes
        self.compactions = 0
        self._lock = threading.Lock()
        self._tenants: dict[str, int] = {}   # tenant id → created_at_ms
        self._settings: dict[str, dict[str, float]] = {}   # tenant id → the settings it set (server/tenants/settings.py)
        self._keys: dict[str, _StoredKey] = {}
        self._wal: TenantLog
        self._wal, records = (open_log(directory) if open_log is not None
                              else WriteAheadLog.open(directory / CATALOG_FILE))
        for meta, _ in records:
            self._apply(meta)
        self._compact_at = max(compact_min_bytes, 2 * self._wal.size_bytes())

    def _apply(self, meta: dict) -> None:
        op = meta["op"]
        if op == "tenant":
            self._tenants[meta["id"]] = int(meta["created"])
            self._settings.pop(meta["id"], None)
        elif op == "drop_tenant":
            self._tenants.pop(meta["id"], None)
            self._settings.pop(meta["id"], None)
        elif op == "settings":   # the tenant's whole settings after an update
            self._settings[meta["id"]] = dict(meta["settings"])
        elif op == "key":
            scope = KeyScope(key_id=meta["key_id"], name=meta["name"], tenant_ids=frozenset(meta["tenant_ids"]),
                             tenant_prefixes=tuple(meta["prefixes"]), admin=bool(meta["admin"]))
            self._keys[meta["key_id"]] = _StoredKey(scope=scope, digest=meta["digest"])
        elif op == "revoke":
            old = self._keys.get(meta["key_id"])
            if old is not None:
                self._keys[meta["key_id"]] = _StoredKey(scope=old.scope, digest=old.digest, revoked=True)
        else:
            raise ValueError(f"unknown catalog op {op!r}")

    def _log(self, meta: dict) -> None:
        """Appends one record durably and applies it; compacts the log past its threshold. Caller holds ``_lock``."""
        self._wal.append([(meta, b"")])
        self._apply(meta)
        if self._wal.size_bytes() >= self._compact_at:
            self._compact_locked()

    def _live_records(self) -> list[dict]:
        """The catalog's state as records that replay to it: tenants (and their settings), then keys."""
        out: list[dict] = []
        for tenant_id, created in self._tenants.items():
            out.append({"op": "tenant", "id": tenant_id, "created": created})
            if tenant_id in self._settings:
                out.append({"op": "settings", "id": tenant_id, "settings": dict(self._settings[tenant_id])})
        for key_id, stored in self._keys.items():
            scope = stored.scope
            out.append(self._key_record(key_id, scope.name, sorted(scope.tenant_ids), list(scope.tenant_prefixes),
                                        scope.admin, stored.digest))
            if stored.revoked:
                out.append({"op": "revoke", "key_id": key_id})
        return out

    def _compact_locked(self) -> None:
        """Rewrites the log as its live records (in a bucket: a base object and a manifest swap, then the
        superseded segments go after the grace period). A failure leaves the log as it was."""
        before = self._wal.size_bytes()
        try:
            tmp = self._wal.write_replacement([(m, b"") for m in self._live_records()], upto=before)
            size = self._wal.publish(tmp, tail_from=before)
        except Exception:
            log.exception("catalog: compaction failed; the log stays as it was")
            self._compact_at = 2 * before
            return
        self.compactions += 1
        self._compact_at = max(self.compact_min_bytes, 2 * size)
        log.info("catalog: log compacted %d -> %d bytes (%d tenants, %d keys)", before, size, len(self._tenants),
                 len(self._keys))

    # -- tenants ----------------------------------------------------------------------------------
    def has_tenant(self, tenant_id: str) -> bool:
        return tenant_id in self._tenants

    def tenants(self) -> list[str]:
        return sorted(self._tenants)

    def create_tenant(self, tenant_id: str) -> None:
        with self._lock:
            if tenant_id in self._tenants:
                raise AlreadyExists(f"tenant {tenant_id!r} already exists")
            self._log({"op": "tenant", "id": tenant_id, "created": int(time.time() * 1000)})

    def drop_tenant(self, tenant_id: str) -> None:
        with self._lock:
            if tenant_id not in self._tenants:
                raise NotFound(f"tenant {tenant_id!r} does not exist")
            self._log({"op": "drop_tenant", "id": tenant_id})

    def settings(self, tenant_id: str) -> TenantSettings:
        """What the tenant set (unset fields: the server's config); no lock, a dict read on the write path."""
        return TenantSettings.from_stored(self._settings.get(tenant_id, {}))

    def update_settings(self, tenant_id: str, values: dict[str, float], reset: list[str]) -> TenantSettings:
        """Stores ``values`` and drops ``reset`` (checked by ``settings.checked_update``), durably, in one record."""
        with self._lock:
            if tenant_id not in self._tenants:
                raise NotFound(f"tenant {tenant_id!r} does not exist")
            merged = {k: v for k, v in {**self._settings.get(tenant_id, {}), **values}.items() if k not in reset}
            self._log({"op": "settings", "id": tenant_id, "settings": merged})
            return TenantSettings.from_stored(merged)

    # -- keys -------------------------------------------------------------------------------------
    def ensure_admin_key(self, configured: str) -> str | None:
        """Installs the admin key. Returns a newly generated secret (to show once), else None."""
        with self._lock:
            if configured:
                if KEY_RE.match(configured) is None and len(configured) < 16:
                    raise InvalidArgument("the configured admin key must be at least 16 characters")
                stored = self._keys.get(ADMIN_KEY_ID)
                if stored is None or stored.digest != hash_key(configured):
                    self._log(self._key_record(ADMIN_KEY_ID, "admin", [], [], True, hash_key(configured)))
                return None
            if ADMIN_KEY_ID in self._keys:
                return None
            secret = f"egk_{ADMIN_KEY_ID}_{secrets.token_urlsafe(32)}"
            self._log(self._key_record(ADMIN_KEY_ID, "admin", [], [], True, hash_key(secret)))
            return secret

    @staticmethod
    def _key_record(key_id: str, name: str, tenant_ids: list[str], prefixes: list[str], admin: bool,
                    digest: str) -> dict:
        return {"op": "key", "key_id": key_id, "name": name, "tenant_ids": tenant_ids, "prefixes": prefixes,
                "admin": admin, "digest": digest}

    def create_key(self, *, name: str, tenant_ids: list[str], prefixes: list[str], admin: bool) -> tuple[str, str]:
        if len(name) > 128:
            raise InvalidArgument("key name is longer than 128 characters")
        for tenant_id in tenant_ids:
            validate_tenant_id(tenant_id)
        for prefix in prefixes:
            if not PREFIX_RE.fullmatch(prefix) or len(prefix) > 128 or ".." in prefix:
                raise InvalidArgument(f"invalid tenant prefix {prefix!r}")
            if not prefix.endswith("/") or "//" in prefix:
                # "acme" would also cover "acme2" and "acme-evil": a prefix covers whole path segments only.
                raise InvalidArgument(f"tenant prefix {prefix!r} must end with '/' (e.g. 'acme/')")
        if not (tenant_ids or prefixes or admin):
            raise InvalidArgument("a key must cover at least one tenant id or prefix, or be admin")
        key_id = secrets.token_hex(8)
        secret = f"egk_{key_id}_{secrets.token_urlsafe(32)}"
        with self._lock:
            self._log(self._key_record(key_id, name, sorted(set(tenant_ids)), sorted(set(prefixes)), admin,
                                       hash_key(secret)))
        return key_id, secret

    def _managed_key(self, key_id: str) -> _StoredKey:
        """A key that RevokeKey and RotateKey may change. Caller holds ``_lock``."""
        if KEY_ID_RE.match(key_id) is None:
            raise InvalidArgument("key_id must be the 16 hex digits CreateKey returned")
        if key_id == ADMIN_KEY_ID:
            raise InvalidArgument("the bootstrap admin key is set by configuration (ENGRAM_ADMIN_KEY); change it there")
        stored = self._keys.get(key_id)
        if stored is None:
            raise NotFound("no such key")
        return stored

    def revoke_key(self, key_id: str) -> None:
        """Durably marks the key revoked; idempotent."""
        with self._lock:
            if not self._managed_key(key_id).revoked:
                self._log({"op": "revoke", "key_id": key_id})

    def rotate_key(self, key_id: str) -> str:
        """Gives the key a new secret (same id, same scope); the old secret stops working now."""
        with self._lock:
            stored = self._managed_key(key_id)
            if stored.revoked:
                raise NotFound("no such key (it was revoked)")
            scope = stored.scope
            secret = f"egk_{key_id}_{secrets.token_urlsafe(32)}"
            self._log(self._key_record(key_id, scope.name, sorted(scope.tenant_ids), list(scope.tenant_prefixes),
                                       scope.admin, hash_key(secret)))
            return secret

    def authenticate(self, presented: str) -> KeyScope:
        digest = hash_key(presented)
        match = KEY_RE.match(presented)
        stored = self._keys.get(match.group(1)) if match else self._keys.get(ADMIN_KEY_ID)
        if stored is None or stored.revoked or not hmac.compare_digest(stored.digest, digest):
            raise Unauthenticated("invalid or revoked key")
        return stored.scope

    def close(self) -> None:
        self._wal.close()
