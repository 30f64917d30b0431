"""The tenant registry: tenants exist in the catalog, and their shards load lazily on first use."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
from pathlib import Path

from server.errors import NotFound
from server.tenants.catalog import Catalog
from server.tenants.shard import TenantShard

log = logging.getLogger(__name__)


def tenant_dirname(tenant_id: str) -> str:
    return hashlib.sha256(tenant_id.encode()).hexdigest()[:32]


class TenantRegistry:
    def __init__(self, *, data_dir: Path, catalog: Catalog, dim: int) -> None:
        self.root = data_dir / "tenants"
        self.root.mkdir(parents=True, exist_ok=True)
        self.catalog = catalog
        self.dim = dim
        self._shards: dict[str, TenantShard] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def directory(self, tenant_id: str) -> Path:
        return self.root / tenant_dirname(tenant_id)

    def create(self, tenant_id: str) -> None:
        directory = self.directory(tenant_id)
        if directory.exists() and not self.catalog.has_tenant(tenant_id):
            shutil.rmtree(directory)  # leftovers of a tenant that was dropped
        self.catalog.create_tenant(tenant_id)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tenant.json").write_text(json.dumps({"tenant_id": tenant_id}))

    def shard(self, tenant_id: str) -> TenantShard:
        """The tenant's shard, loading it if needed (blocking: call from a worker thread)."""
        shard = self._shards.get(tenant_id)
        if shard is not None:
            return shard
        if not self.catalog.has_tenant(tenant_id):
            raise NotFound(f"tenant {tenant_id!r} does not exist")
        with self._lock:
            gate = self._loading.setdefault(tenant_id, threading.Lock())
        with gate:
            shard = self._shards.get(tenant_id)
            if shard is None:
                shard = TenantShard.load(tenant_id, self.directory(tenant_id), dim=self.dim)
                with self._lock:
                    self._shards[tenant_id] = shard
        return shard

    def loaded(self) -> list[TenantShard]:
        with self._lock:
            return list(self._shards.values())

    def flush(self) -> None:
        for shard in self.loaded():
            shard.flush()

    def close(self) -> None:
        with self._lock:
            shards = list(self._shards.values())
            self._shards.clear()
        for shard in shards:
            shard.close()
