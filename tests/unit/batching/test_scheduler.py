"""The pure batch scheduler: budget, ordering, cancellation, deadlines and tenant fairness."""

from __future__ import annotations

from dataclasses import dataclass

from server.batching.scheduler import next_batch, padded_cost


@dataclass(eq=False)
class Job:
    tenant_id: str
    tokens: int
    name: str = ""
    deadline_ns: int | None = None
    gone: bool = False

    def cancelled(self) -> bool:
        return self.gone


def names(jobs: list[Job]) -> list[str]:
    return [j.name for j in jobs]


def test_padded_cost_is_longest_times_count() -> None:
    assert padded_cost([3, 10, 4]) == 30
    assert padded_cost([]) == 0


def test_budget_counts_padding_and_the_overflowing_entry_stays_first_in_line() -> None:
    queue = [Job("a", 10, "a1"), Job("a", 10, "a2"), Job("a", 40, "a3"), Job("a", 5, "a4")]
    plan = next_batch(queue, max_tokens=100, max_requests=64, now_ns=0)
    # a1, a2 cost 20; adding a3 pads all three to 40 → 120 > 100: a3 waits, and a4 may not jump it.
    assert names(plan.batch) == ["a1", "a2"]
    assert names(plan.remaining) == ["a3", "a4"]
    assert padded_cost([j.tokens for j in plan.batch]) <= 100
    second = next_batch(plan.remaining, max_tokens=100, max_requests=64, now_ns=0)
    assert names(second.batch) == ["a3", "a4"]


def test_an_entry_larger_than_the_budget_still_runs_alone() -> None:
    plan = next_batch([Job("a", 500, "big"), Job("a", 1, "small")], max_tokens=100, max_requests=8, now_ns=0)
    assert names(plan.batch) == ["big"]
    assert names(plan.remaining) == ["small"]


def test_max_requests_caps_the_batch_and_keeps_arrival_order_within_a_tenant() -> None:
    queue = [Job("a", 1, f"a{i}") for i in range(10)]
    plan = next_batch(queue, max_tokens=10_000, max_requests=4, now_ns=0)
    assert names(plan.batch) == ["a0", "a1", "a2", "a3"]
    assert names(plan.remaining) == [f"a{i}" for i in range(4, 10)]


def test_cancelled_and_expired_entries_are_dropped_before_any_batch() -> None:
    queue = [Job("a", 1, "live1"), Job("a", 1, "cancelled", gone=True), Job("b", 1, "expired", deadline_ns=50),
             Job("b", 1, "live2", deadline_ns=500)]
    plan = next_batch(queue, max_tokens=100, max_requests=8, now_ns=100)
    assert sorted(names(plan.dropped)) == ["cancelled", "expired"]
    assert sorted(names(plan.batch)) == ["live1", "live2"]
    assert plan.remaining == []


def test_a_flooding_tenant_cannot_starve_the_others() -> None:
    flood = [Job("flood", 1, f"f{i}") for i in range(100)]
    queue = [*flood, Job("quiet1", 1, "q1"), Job("quiet2", 1, "q2")]
    plan = next_batch(queue, max_tokens=10_000, max_requests=8, now_ns=0)
    # Round-robin across tenants in order of their oldest entry: both quiet tenants ride in the first batch.
    assert names(plan.batch)[:3] == ["f0", "q1", "q2"]
    assert len(plan.batch) == 8 and names(plan.batch)[3:] == ["f1", "f2", "f3", "f4", "f5"]
    assert len(plan.remaining) == 94


def test_round_robin_gives_each_tenant_an_equal_share_under_contention() -> None:
    queue = [Job(t, 1, f"{t}{i}") for i in range(20) for t in ("a", "b", "c", "d")]
    plan = next_batch(queue, max_tokens=10_000, max_requests=8, now_ns=0)
    counts = {t: sum(j.tenant_id == t for j in plan.batch) for t in "abcd"}
    assert counts == {"a": 2, "b": 2, "c": 2, "d": 2}


def test_empty_queue_gives_an_empty_plan() -> None:
    plan = next_batch([], max_tokens=100, max_requests=8, now_ns=0)
    assert plan.batch == [] and plan.dropped == [] and plan.remaining == []
