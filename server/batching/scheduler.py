"""The pure batch scheduler: which queued entries form the next batch. No I/O, no clocks of its own.

Rules (after TEI's queue): an entry that was cancelled or whose deadline passed is dropped before any
device work; a batch's padded cost is ``longest entry × entries`` and stays within ``max_tokens`` (a
single over-long entry still forms a batch of one, since the model truncates it); at most
``max_requests`` entries; tenants take turns (round-robin in order of their oldest entry), so one
tenant's flood cannot starve the others; an entry that would overflow the budget stays queued, in place,
for the next batch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Schedulable(Protocol):
    @property
    def tenant_id(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def deadline_ns(self) -> int | None: ...
    def cancelled(self) -> bool: ...


E = TypeVar("E", bound=Schedulable)


@dataclass(frozen=True)
class Plan(Generic[E]):
    batch: list[E]      # in the order they run
    dropped: list[E]    # cancelled or past their deadline
    remaining: list[E]  # still queued, in their original order


def padded_cost(tokens: Sequence[int]) -> int:
    return max(tokens, default=0) * len(tokens)


def next_batch(queue: Sequence[E], *, max_tokens: int, max_requests: int, now_ns: int) -> Plan[E]:
    dropped: list[E] = []
    live: list[E] = []
    for entry in queue:
        if entry.cancelled() or (entry.deadline_ns is not None and entry.deadline_ns <= now_ns):
            dropped.append(entry)
        else:
            live.append(entry)
    per_tenant: OrderedDict[str, list[E]] = OrderedDict()
    for entry in live:
        per_tenant.setdefault(entry.tenant_id, []).append(entry)
    batch: list[E] = []
    chosen: set[int] = set()
    longest = 0
    full = False
    while per_tenant and not full:
        for tenant in list(per_tenant):
            entries = per_tenant[tenant]
            entry = entries[0]
            new_longest = max(longest, entry.tokens)
            if batch and (len(batch) >= max_requests or new_longest * (len(batch) + 1) > max_tokens):
                full = True
                break
            batch.append(entry)
            chosen.add(id(entry))
            longest = new_longest
            entries.pop(0)
            if not entries:
                del per_tenant[tenant]
            if len(batch) >= max_requests:
                full = True
                break
    remaining = [e for e in live if id(e) not in chosen]
    return Plan(batch=batch, dropped=dropped, remaining=remaining)
