"""The pure batch scheduler: which queued entries form the next batch. No I/O, no clocks of its own.

Rules (after TEI's queue): an entry that was cancelled or whose deadline passed is dropped before any
device work; a batch's padded cost is ``longest entry × entries`` and stays within ``max_tokens`` (a
single over-long entry still forms a batch of one, since the model truncates it); at most
``max_requests`` entries; tenants take turns (round-robin in order of their oldest entry), so one
tenant's flood cannot starve the others; an entry that would overflow the budget stays queued, in place,
for the next batch.

Fair share (weighted fair queuing; README "Serving benchmark"). Round-robin inclusion is not enough when
the batch itself grows with a neighbour's queue: a quiet tenant's query then waits for, and rides in,
batches as large as the flood makes them. So while more than one tenant is active (queued, in flight, or answered
within ``ACTIVE_WINDOW_MS``: a closed-loop client between two queries still counts),
each tenant puts at most ``quantum x weight`` entries in a batch (:func:`tenant_caps`); alone, a tenant
fills the batch. The pipeline's last free slot is kept for such a client between its queries while the queued
tenants all have a batch running (:func:`hold_last_slot_ns`). And each tenant holds at most its weighted share of
the queue's capacity among the tenants queued (:func:`admit`): beyond it, RESOURCE_EXHAUSTED at once; when the
queue is full, a tenant within its share pushes out the newest entry of the tenant furthest over its own.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
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


# While several tenants are active each puts at most TENANT_QUANTUM × its weight queries in a batch (alone, a tenant
# fills the batch): a flood cannot grow the batches a quiet tenant rides in (README "Serving benchmark";
# tests/integration/test_fair_share.py: 32 flooding clients beside a quiet one). 2, not 4: one quiet client beside 31
# noisy ones on another tenant (2 x 10k, no rerank, benchmarks/serving/neighbour.py, runs alternating) kept its p95
# within 2.15-2.41x of its p95 alone at 2, against 3.06-3.14x at 4 (3.51x at 3 in a disturbed round); the flood
# pays: 92-93 QPS instead of 127-132. 1 since 2026-12-03 (with ACTIVE_WINDOW_MS): LoCoMo, a tenant per conversation
# (neighbour.py --dataset locomo, alternating) 2.51x (2.20, 2.89) at 1 against 3.53x (4.01, 3.39) at 2, the flood
# 90.7 QPS against 133.4; both probes at 1 in one run: 3.12x synthetic 2 x 10k (3.79x at 2 before), 3.16x LoCoMo.
TENANT_QUANTUM = 1


def padded_cost(tokens: Sequence[int]) -> int:
    return max(tokens, default=0) * len(tokens)


# A tenant counts as active for this long after its last answer: a closed-loop client is between requests for a few
# ms, and a batch formed in that gap would otherwise give a flood the whole batch (16 under split_at) just before the
# quiet client's next query arrives to wait behind it.
ACTIVE_WINDOW_MS = 50.0


def active_tenants(in_flight: Collection[str], answered_ns: Mapping[str, int], *, now_ns: int,
                   window_ns: int) -> set[str]:
    """Tenants with a request submitted and not answered, or one answered within ``window_ns`` of ``now_ns``."""
    return set(in_flight) | {t for t, at in answered_ns.items() if now_ns - at < window_ns}


def hold_last_slot_ns(queued: Collection[str], *, running: Mapping[str, int], in_flight: Collection[str],
                      answered_ns: Mapping[str, int], now_ns: int, window_ns: int) -> int:
    """How long to keep the pipeline's last free slot empty (0: form the batch now). It is kept for a tenant that
    is active (answered within ``window_ns``) with nothing in flight, a closed-loop client between two queries,
    while every ``queued`` tenant already has a batch ``running``: a flood then holds one slot, never both, and the
    quiet query that arrives next starts at once instead of waiting for a flood batch to leave the pipeline. Until
    the soonest such window ends (an arrival or a freed slot decides again)."""
    if not queued or any(running.get(t, 0) <= 0 for t in queued):
        return 0
    ends = [at + window_ns - now_ns for t, at in answered_ns.items() if t not in in_flight and now_ns - at < window_ns]
    return max(0, min(ends)) if ends else 0


def tenant_caps(queued: Collection[str], *, active: int, weights: Mapping[str, float], quantum: int,
                max_requests: int) -> dict[str, int]:
    """Entries each queued tenant may put in the next batch: the whole batch while it is the only active
    tenant (``active``: tenants queued or in flight), else ``max(1, round(quantum x weight))``."""
    if active <= 1 or quantum <= 0:
        return {t: max_requests for t in queued}
    return {t: max(1, min(max_requests, round(quantum * weights.get(t, 1.0)))) for t in queued}


@dataclass(frozen=True)
class Admission:
    accept: bool
    push_out: str | None = None   # a tenant over its share whose newest entry makes room


def admit(counts: Mapping[str, int], tenant: str, *, capacity: int, weights: Mapping[str, float]) -> Admission:
    """Whether ``tenant`` may queue one more entry, given each tenant's queued ``counts``: within its
    weighted share of ``capacity`` among the tenants queued (itself included), and room in the queue or a
    tenant over its share to push out."""
    active = {t for t, n in counts.items() if n > 0} | {tenant}
    total_w = sum(weights.get(t, 1.0) for t in active)

    def share(t: str) -> float:
        return capacity * weights.get(t, 1.0) / total_w

    if counts.get(tenant, 0) >= max(1, math.floor(share(tenant))):
        return Admission(False)
    if sum(counts.values()) < capacity:
        return Admission(True)
    others = sorted(active - {tenant})
    if others:
        over = max(others, key=lambda t: counts.get(t, 0) / share(t))
        if counts.get(over, 0) > share(over):
            return Admission(True, push_out=over)
    return Admission(False)


def next_batch(queue: Sequence[E], *, max_tokens: int, max_requests: int, now_ns: int,
               caps: Mapping[str, int] | None = None) -> Plan[E]:
    """``caps``: at most this many entries of a tenant (absent: no cap but ``max_requests``)."""
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
    taken: dict[str, int] = {}
    longest = 0
    full = False
    while per_tenant and not full:
        for tenant in list(per_tenant):
            entries = per_tenant[tenant]
            if caps is not None and taken.get(tenant, 0) >= caps.get(tenant, max_requests):
                del per_tenant[tenant]   # its share of this batch is used: the rest waits for the next
                continue
            entry = entries[0]
            new_longest = max(longest, entry.tokens)
            if batch and (len(batch) >= max_requests or new_longest * (len(batch) + 1) > max_tokens):
                full = True
                break
            batch.append(entry)
            chosen.add(id(entry))
            taken[tenant] = taken.get(tenant, 0) + 1
            longest = new_longest
            entries.pop(0)
            if not entries:
                del per_tenant[tenant]
            if len(batch) >= max_requests:
                full = True
                break
    remaining = [e for e in live if id(e) not in chosen]
    return Plan(batch=batch, dropped=dropped, remaining=remaining)


def embed_chunks(lengths: Sequence[int], *, max_tokens: int, parts: int = 1) -> list[list[int]]:
    """A write batch's texts (their token ``lengths``) as the sub-batches its forward passes run: longest first,
    so each chunk holds texts of about one length (short texts never pay a long one's attention padding), each
    within ``max_tokens`` tokens (one longer text still forms a chunk of one), and never fewer than ``parts``
    chunks of about equal tokens when the batch has that many texts (one per device lane, finishing together).
    Returns row indices into ``lengths``; every row once."""
    if not len(lengths):
        return []
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    total = sum(max(1, n) for n in lengths)
    chunks = max(min(parts, len(order)), -(-total // max(1, max_tokens)))
    if parts > 1 and chunks % parts and chunks > parts:   # whole rounds across the lanes
        chunks += parts - chunks % parts
    budget = min(max_tokens, -(-total // chunks))
    out: list[list[int]] = [[]]
    used = 0
    for i in order:
        n = max(1, lengths[i])
        if out[-1] and used + n > budget and len(out) < chunks:
            out.append([])
            used = 0
        elif out[-1] and used + n > max_tokens:   # all chunks formed: only the token cap splits again
            out.append([])
            used = 0
        out[-1].append(i)
        used += n
    return out
