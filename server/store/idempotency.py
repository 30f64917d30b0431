"""The idempotency table of one tenant: which mutating calls it already answered, and what it answered.

A client that lost the answer to a Write / Delete / Forget / Confirm (the replica died mid-call, a deadline
passed, the connection reset: the outcome is unknown) sends the same call again with the same idempotency
key; the store answers it from here instead of applying it twice.

Durability: a call's :class:`Done` is one record (``op: "idem"``) in **the same log group as the change it
answers** (:meth:`server.store.memory_store.TenantStore.commit`), so the change and the record land together
or not at all, in the local WAL and in the object-storage log alike (both store a record's meta verbatim):
after a crash and restart, or after another replica takes the tenant over and replays its log, a retry
is still answered from the record. A call that changed nothing (a Delete of unknown ids) still commits its
record alone: its answer is what a retry must get back.

Keys are per tenant (each tenant has its own table) and per call kind: ``("write", k)`` and
``("delete", k)`` are two entries. A call's *fingerprint* (a hash of its request body, :func:`fingerprint`)
is kept beside its answer; the same key with another body is refused by the caller (INVALID_ARGUMENT).

The window (bounded memory and log): an entry is answered while it is younger than ``WINDOW_MS`` (24 h)
and among the last ``MAX_ENTRIES`` (10,000) of the tenant, whichever is shorter, with at most
``MAX_BYTES`` (8 MiB of encoded records) in all. Measured on this machine (tests/unit/store/
test_idempotency.py prints it): a one-memory Write's entry is 195 bytes of log and 747 bytes of Python
heap (``ENTRY_HEAP_BYTES``, what the shard's memory budget counts), so 10,000 entries cost ~2 MB of log
and ~7.5 MB of RAM per tenant at the worst — about what the 10,000 memories those writes made cost
already (``MEMORY_BYTES`` = 700 each, beside their content) — and a tenant writing 10 calls a second
still keeps its keys for ~17 minutes, far beyond the SDK's own retries (bounded by the call's deadline,
30 s by default). A 24 h window with no count cap would hold 864,000 entries (~650 MB) for that tenant. Age is measured against the newest entry's time
(``at_ms``, the server's clock when the call committed), not the wall clock: replay, compaction and
lookups agree on what is in the window, and a compaction (:meth:`IdempotencyTable.live`) keeps a superset
of what a later lookup can still answer, so it never forgets a key still inside the window.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import operator
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

OP = "idem"                              # the log record's op
WINDOW_MS = 24 * 3600 * 1000             # an answer is kept this long after its call ...
MAX_ENTRIES = 10_000                     # ... and only for the last this many calls of the tenant
MAX_BYTES = 8 << 20                      # ... and within this many bytes of encoded records
ENTRY_HEAP_BYTES = 750                   # measured: a one-memory Write's entry on the heap (+ its answer's bytes)
KINDS = frozenset({"write", "delete", "forget", "confirm"})


@dataclass(frozen=True)
class Done:
    """One answered call: its kind and key, its request's fingerprint, its answer (JSON-able: each call
    kind encodes its own, see :mod:`server.engine.idempotent`) and when it committed."""

    kind: str
    key: str
    fingerprint: str
    answer: Any
    at_ms: int

    def record(self, seq: int) -> dict[str, Any]:
        return {"op": OP, "seq": seq, "k": self.kind, "key": self.key, "fp": self.fingerprint, "at": self.at_ms,
                "a": self.answer}

    @classmethod
    def from_record(cls, meta: Mapping[str, Any]) -> Done:
        return cls(kind=str(meta["k"]), key=str(meta["key"]), fingerprint=str(meta["fp"]), answer=meta["a"],
                   at_ms=int(meta["at"]))

    def encoded_bytes(self) -> int:
        """About what its record takes in the log (the meta JSON and the record header)."""
        return 12 + len(json.dumps(self.record(0), separators=(",", ":"), ensure_ascii=False).encode())


class IdempotencyTable:
    """The tenant's answered calls in commit order, pruned to the window. Owned by the tenant's store: it
    is rebuilt by replaying the log and kept by compaction; thread-safe (lookups come from the event loop,
    records from the write threads)."""

    def __init__(self, *, window_ms: int = WINDOW_MS, max_entries: int = MAX_ENTRIES,
                 max_bytes: int = MAX_BYTES) -> None:
        self.window_ms = window_ms
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._done: dict[tuple[str, str], tuple[Done, int]] = {}   # (kind, key) → (its Done, its bytes)
        self._bytes = 0
        self._newest_ms = 0

    def get(self, kind: str, key: str, *, now_ms: int) -> Done | None:
        """The answered call with this kind and key, if it is still inside the window at ``now_ms``."""
        with self._lock:
            found = self._done.get((kind, key))
        if found is None or found[0].at_ms < max(now_ms, self._newest_ms) - self.window_ms:
            return None
        return found[0]

    def add(self, done: Done) -> None:
        """Records an answered call (a commit, or a replayed record), then prunes to the window."""
        size = done.encoded_bytes()
        with self._lock:
            old = self._done.pop((done.kind, done.key), None)   # the same key again after its window
            if old is not None:
                self._bytes -= old[1]
            self._done[(done.kind, done.key)] = (done, size)
            self._bytes += size
            self._newest_ms = max(self._newest_ms, done.at_ms)
            horizon = self._newest_ms - self.window_ms
            while self._done:
                first_key = next(iter(self._done))
                first, first_size = self._done[first_key]
                if (first.at_ms >= horizon and len(self._done) <= self.max_entries
                        and self._bytes <= self.max_bytes):
                    break
                del self._done[first_key]
                self._bytes -= first_size

    def live(self) -> list[Done]:
        """Every entry still kept, in commit order: what a compaction writes back to the log."""
        with self._lock:
            return [done for done, _ in self._done.values()]

    def __len__(self) -> int:
        return len(self._done)

    @property
    def encoded_bytes(self) -> int:
        """What the kept entries take in a compacted log."""
        return self._bytes

    def ram_bytes(self) -> int:
        """About what the kept entries take on the heap (a large answer counts its encoded size again)."""
        return len(self._done) * ENTRY_HEAP_BYTES + self._bytes


def fingerprint(kind: str, body: Any) -> str:
    """A hash of a call's request body (domain values: dataclasses, enums, sets, mappings, sequences),
    independent of set and mapping order: the same request sent again has the same fingerprint. The text hashed
    is the JSON of the body with every field of every dataclass, keys sorted, sets sorted by the ``repr`` of
    their plain values: the same bytes in every version (a record in the log is compared with a retry that may
    reach a newer or an older server; tests/unit/store/test_idempotency.py holds values for fixed requests).
    Built by the C encoder, which calls :func:`_as_json` only for what JSON has no type for (dataclasses,
    non-int enums, sets, other mappings): 0.7 ms a Write of 128 short turns where a Python walk that built a
    plain copy of every field first took ~3 ms (2-core EPYC)."""
    text = json.dumps([kind, body], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_as_json)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, ...], Callable[[Any], Any]]:
    names = tuple(f.name for f in dataclasses.fields(cls))
    get = operator.attrgetter(*names)
    return names, (get if len(names) > 1 else lambda value: (get(value),))


def _as_json(value: Any) -> Any:
    """What the encoder writes for a value JSON has no type for (an int enum is an int to it already)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names, get = _fields(type(value))
        return dict(zip(names, get(value), strict=True))
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=repr)
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    raise TypeError(f"a request body holds a {type(value).__name__}, which has no fingerprint")


def _plain(value: Any) -> Any:
    """A plain copy of a value: what the fingerprint's JSON writes for it (a set's members are sorted by it)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=repr)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
