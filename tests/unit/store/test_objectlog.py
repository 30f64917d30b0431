"""The object-storage log's protocol against moto: owners taking a tenant over while deposed ones keep
trying, answers lost after a PUT landed, requests that never left, compactions racing appends, and garbage
collection. A Hypothesis state machine runs them interleaved; the invariant is the log itself: every
replay holds every acknowledged commit exactly once, in order, and nothing that was never written."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from server.errors import NotOwner, StoreUnavailable
from server.store.objectlog import ObjectLog, tenant_root
from server.store.s3 import ObjectStore
from server.store.wal import Record
from tests.unit.store.s3_support import Faults, mocked, new_store

_counter = itertools.count()


def group(n: int = 2) -> list[Record]:
    """A group of ``n`` records, each unique (the log must never merge, drop or repeat one)."""
    tag = next(_counter)
    return [({"op": "put", "tag": tag, "i": i}, bytes([tag % 251, i])) for i in range(n)]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def moto() -> Iterator[None]:
    with mocked():
        yield


def replica(store: ObjectStore, tenant: str, name: str, clock: Clock | None = None, grace_s: float = 0.0) -> ObjectLog:
    return ObjectLog(store, tenant, owner_id=name, grace_s=grace_s, clock=clock or Clock())


def test_a_deposed_owner_can_never_append_after_a_takeover(moto: None) -> None:
    store, _ = new_store()
    old = replica(store, "t", "old")
    assert old.acquire().records() == []
    first = group()
    old.append(first)
    new = replica(store, "t", "new")
    assert new.acquire().records() == first and new.epoch == old.epoch + 1
    with pytest.raises(NotOwner, match="fenced"):
        old.append(group())
    with pytest.raises(NotOwner):   # and it stays fenced
        old.append(group())
    second = group()
    new.append(second)
    assert replica(store, "t", "reader").read().records() == first + second


def test_a_deposed_owner_stays_fenced_after_the_new_owner_compacted_and_collected(moto: None) -> None:
    store, _ = new_store()
    clock = Clock()
    old = replica(store, "t", "old", clock)
    old.acquire()
    old.append(first := group())
    new = replica(store, "t", "new", clock)
    new.acquire()                          # its fence is the slot the old owner would append at next
    new.append(second := group())
    assert new.compact(first + second, upto_seq=new.next_seq - 1)
    clock.now += 1
    assert new.collect() == 2              # the two commits; both fences stay
    with pytest.raises(NotOwner):
        old.append(group())
    assert replica(store, "t", "reader").read().records() == first + second


def test_commits_of_the_old_owner_that_race_the_takeover_are_kept(moto: None) -> None:
    store, _ = new_store()
    old = replica(store, "t", "old")
    old.acquire()
    new = replica(store, "t", "new")
    new.epoch = new._take_owner()     # the new owner took the record but has not replayed yet
    late = group()
    old.append(late)                  # acknowledged to its client: it must survive the takeover
    new._fence(new.read())
    with pytest.raises(NotOwner):
        old.append(group())
    assert replica(store, "t", "reader").read().records() == late


def test_two_takers_racing_end_with_one_owner(moto: None) -> None:
    store, _ = new_store()
    a, b = replica(store, "t", "a"), replica(store, "t", "b")
    a.epoch = a._take_owner()
    b.epoch = b._take_owner()         # b is above a
    b._fence(b.read())
    with pytest.raises(NotOwner):     # a meets b's fence (a higher epoch) while fencing: it never owned the log
        a._fence(a.read())


def test_a_deposed_owners_compaction_cannot_swap_the_manifest(moto: None) -> None:
    store, _ = new_store()
    old = replica(store, "t", "old")
    old.acquire()
    records = group()
    old.append(records)
    replica(store, "t", "new").acquire()
    with pytest.raises(NotOwner):
        old.compact(records, upto_seq=old.next_seq - 1)


def test_grace_period_then_superseded_objects_go(moto: None) -> None:
    store, _ = new_store()
    clock = Clock()
    owner = replica(store, "t", "a", clock, grace_s=60.0)
    owner.acquire()
    records: list[Record] = []
    for _ in range(3):
        records += group()
        owner.append(records[-2:])
    assert owner.compact(records, upto_seq=owner.next_seq - 1)
    assert owner.collect() == 0                        # within the grace period nothing goes
    assert replica(store, "t", "r").read().records() == records
    clock.now += 61
    assert owner.collect() == 3                        # the three commits; the fence stays
    assert store.keys(tenant_root("t") + "wal/") == [tenant_root("t") + f"wal/{1:020d}"]
    tail = group()
    owner.append(tail)
    assert replica(store, "t", "r").read().records() == records + tail
    first_base = store.keys(tenant_root("t") + "base/")
    assert owner.compact(records + tail, upto_seq=owner.next_seq - 1)
    clock.now += 61
    assert owner.collect() == 2                        # the tail's segment and the superseded base
    assert store.keys(tenant_root("t") + "base/") != first_base
    assert replica(store, "t", "r").read().records() == records + tail


def test_artefacts_ride_with_their_base_and_go_with_it(moto: None) -> None:
    store, _ = new_store()
    clock = Clock()
    owner = replica(store, "t", "a", clock)
    owner.acquire()
    owner.append(records := group())
    assert owner.compact(records, upto_seq=owner.next_seq - 1, artefacts={"dense.snap": b"ivf", "lucene": b"seg"})
    replay = replica(store, "t", "b", clock).acquire()
    assert replay.artefacts == {"dense.snap": b"ivf", "lucene": b"seg"} and replay.records() == records
    taker = replica(store, "t", "c", clock)
    taker.acquire()
    assert taker.compact(records, upto_seq=taker.next_seq - 1)   # a base without artefacts supersedes it
    clock.now += 1
    taker.collect()
    assert store.keys(tenant_root("t") + "base/") == [taker._manifest.base]
    assert replica(store, "t", "d", clock).acquire().artefacts == {}


class LogMachine(RuleBasedStateMachine):
    """Three replicas of one tenant, each on its own client with its own faults."""

    def __init__(self) -> None:
        super().__init__()
        self.tenant = uuid.uuid4().hex
        self.clock = Clock()
        self.replicas: list[tuple[ObjectLog, Faults]] = []
        for name in "abc":
            store, faults = new_store(attempts=2)
            self.replicas.append((replica(store, self.tenant, name, self.clock, grace_s=30.0), faults))
        self.acked: list[Record] = []        # acknowledged, or landed with its answer lost: in the log, once each
        self.owner: int | None = None
        self.plans: list[tuple[int, int, list[Record]]] = []   # (replica, upto_seq, records up to it)

    @initialize()
    def start(self) -> None:
        self.takeover(0)

    @rule(r=st.integers(0, 2))
    def takeover(self, r: int) -> None:
        log, faults = self.replicas[r]
        faults.lost = faults.refused = 0
        faults.dark = False
        fresh = ObjectLog(log.store, self.tenant, owner_id=log.owner_id, grace_s=log.grace_s, clock=self.clock)
        replay = fresh.acquire()
        assert replay.records() == self.acked
        self.replicas[r] = (fresh, faults)
        self.owner = r

    @rule(r=st.integers(0, 2), fault=st.sampled_from(["none", "none", "lost", "refused", "dark"]))
    def append(self, r: int, fault: str) -> None:
        log, faults = self.replicas[r]
        records = group()
        if not log.next_seq:
            return
        if fault == "lost":
            faults.lost = 1
        elif fault == "refused":
            faults.refused = 2
        elif fault == "dark":
            faults.lost, faults.dark = 1, True
        landed = faults.puts_landed
        try:
            log.append(records)
        except NotOwner:
            assert r != self.owner or log.fenced
            assert faults.puts_landed == landed
            return
        except StoreUnavailable as exc:
            if exc.outcome_unknown and faults.puts_landed > landed:
                self.acked.extend(records)     # it landed: every later replay must hold it
            else:
                assert faults.puts_landed == landed
            return
        finally:
            faults.lost = faults.refused = 0
            faults.dark = False
        assert r == self.owner, "a deposed owner appended"
        self.acked.extend(records)

    @precondition(lambda self: self.owner is not None)
    @rule()
    def plan_compaction(self) -> None:
        log, _ = self.replicas[self.owner]  # type: ignore[index]
        if log.next_seq and not log.uncertain and not log.fenced:
            self.plans.append((self.owner, log.next_seq - 1, list(self.acked)))  # type: ignore[arg-type]

    @precondition(lambda self: bool(self.plans))
    @rule(data=st.data())
    def finish_compaction(self, data: st.DataObject) -> None:
        r, upto, records = self.plans.pop(data.draw(st.integers(0, len(self.plans) - 1)))
        log, _ = self.replicas[r]
        try:
            log.compact(records, upto_seq=upto)     # appends went on since the plan: they stay in the tail
        except NotOwner:
            assert r != self.owner
            self.plans = [p for p in self.plans if p[0] != r]

    @rule(seconds=st.sampled_from([1.0, 31.0]))
    def collect(self, seconds: float) -> None:
        self.clock.now += seconds
        for log, _ in self.replicas:
            if log.next_seq and not log.fenced:
                log.collect()

    @invariant()
    def a_reader_sees_the_acknowledged_log(self) -> None:
        log, _ = self.replicas[0]
        assert ObjectLog(log.store, self.tenant, owner_id="reader").read().records() == self.acked


def test_protocol_state_machine(moto: None) -> None:
    LogMachine.TestCase.settings = settings(max_examples=10, stateful_step_count=20, deadline=None,
                                            suppress_health_check=list(HealthCheck))
    LogMachine.TestCase().runTest()
