"""The durable log of one tenant: the seam between the store and where its records are made durable.

A :class:`TenantLog` is what :class:`server.store.memory_store.TenantStore` writes through:

* ``append(records)`` makes one group commit durable and returns only then (raises when it could not: the
  store applies nothing of a group whose ``append`` raised);
* opening it (a :data:`LogOpener`) replays every record, base first, in log order;
* compaction is two calls: ``write_replacement(records, upto=...)`` writes a base that stands for the log's
  first ``upto`` bytes (slow; commits go on meanwhile), then ``publish(tmp, tail_from=upto)`` (under the
  store's lock) swaps it in, keeping what was appended after ``upto``. Records superseded by a base are
  dropped (at once on disk; after a grace period in object storage);
* ``read(upto=...)`` reads records back (a compaction's vectors, an index rebuild's exact vectors).

Two implementations: :class:`server.store.wal.WriteAheadLog` (a local file with fsync; its format is
unchanged) and :class:`server.store.object_wal.ObjectBackedLog` (S3-compatible object storage is the source
of truth, one immutable object per group commit, fenced against deposed owners; the local file is a cache).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from server.store.wal import Record


class TenantLog(Protocol):
    @property
    def path(self) -> Path: ...   # the log's local file (a rebuildable cache when the log is remote)

    def append(self, records: Sequence[Record]) -> None: ...

    def size_bytes(self) -> int: ...

    # The store seq of the base the replay started from: history before it is gone, so an index cache committed
    # below it (another owner compacted the log since) cannot be caught up and must be rebuilt. 0: none.
    @property
    def compacted_seq(self) -> int: ...

    # True where compacted_seq comes from the log's own base (object storage). Where it does not (the local file),
    # a compaction writes its base's seq as the first record instead (TenantStore.base_seq). Object logs never get
    # that record, so a replica of an older version still reads a base a newer one wrote (rolling upgrades).
    keeps_base_seq: bool

    # True once the log refuses appends until it is reopened (object storage: a commit's outcome is unknown,
    # or another owner fenced it); the registry then reloads the tenant on its next request.
    @property
    def needs_reload(self) -> bool: ...

    def read(self, *, upto: int | None = None) -> list[Record]: ...

    def write_replacement(self, records: Sequence[Record], *, upto: int | None = None,
                          artefacts: Mapping[str, bytes] | None = None) -> Path: ...

    # Whether a compaction's ``artefacts`` (a shard's index snapshots) are kept beside its base, and handed back
    # once by ``take_artefacts`` after the open that replayed that base (object storage: yes; a local file: no).
    stores_artefacts: bool

    def take_artefacts(self) -> dict[str, bytes]: ...

    def publish(self, tmp: Path, *, tail_from: int | None) -> int: ...

    def close(self) -> None: ...


# directory of the tenant → (its log, every record to replay); TenantStore.open's default is the local file
LogOpener = Callable[[Path], "tuple[TenantLog, list[Record]]"]

CATALOG_FILE = "catalog.wal"   # the server catalog's log (server/tenants/catalog.py) in ``data_dir/system``

