"""The memory RPCs' logic (server/engine/memories.py) on a shard with no Lucene and an injected clock:
capacity, expiry, history, confirmation, forgetting, purges, uses and the audit lines they leave."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine_support import DAY_MS, HOUR_MS, T0, Clock, make_shard, write
from server.config import ServerConfig, load_config
from server.domain import AuditOp, Filter, ForgetMode, ForgetSpec, MemoryInput, MemoryStatus, MemoryType
from server.engine.memories import Memories
from server.errors import FailedPrecondition, InvalidArgument, NotFound


def config(**memory: object) -> ServerConfig:
    return load_config(env={}, overrides={"memory": memory} if memory else {})


def ops(shard) -> list[AuditOp]:  # type: ignore[no-untyped-def]
    return [e.op for e in shard.audit.read(after=0, limit=1000)[0]]


def test_capacity_archives_the_lowest_decayed_importance_never_pinned_or_just_written(tmp_path: Path) -> None:
    clock = Clock()
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config(capacity_per_tenant=3))
    old, fresh, pinned = write(shard, [
        MemoryInput(content="old episode", type=MemoryType.EPISODIC, importance=0.9, last_access_at_ms=T0 - 20 * DAY_MS),
        MemoryInput(content="fresh episode", type=MemoryType.EPISODIC, importance=0.5, last_access_at_ms=T0),
        MemoryInput(content="pinned rule", importance=0.1, pinned=True)], now_ms=T0)
    assert memories.decayed_importance(shard.store.get(old.memory_id), now_ms=clock()) < 0.01   # 10 half-lives
    newest = write(shard, [MemoryInput(content="newest", importance=0.1)], now_ms=clock.advance(HOUR_MS), seed=1)
    with shard.write_lock:
        archived = memories.enforce_capacity_locked(shard, keep={newest[0].memory_id}, now_ms=clock())
    assert archived == [old.memory_id]                       # 0.9 decayed to ~0 loses to 0.5 fresh and pinned 0.1
    assert shard.store.get(old.memory_id).status == MemoryStatus.ARCHIVED
    assert {shard.store.get(m.memory_id).status for m in (fresh, pinned, newest[0])} == {MemoryStatus.ACTIVE}
    assert ops(shard)[-1] == AuditOp.ARCHIVE


def test_a_passed_expiry_shows_at_once_and_the_flush_persists_it(tmp_path: Path) -> None:
    clock = Clock()
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    (soon,) = write(shard, [MemoryInput(content="offer ends", expires_at_ms=T0 + HOUR_MS)], now_ms=T0)
    assert memories.get(shard, [soon.memory_id], now_ms=clock())[0][0].status == MemoryStatus.ACTIVE
    found, missing = memories.get(shard, [soon.memory_id, "m-nope"], now_ms=clock.advance(2 * HOUR_MS))
    assert found[0].status == MemoryStatus.EXPIRED and missing == ["m-nope"]
    assert shard.store.get(soon.memory_id).status == MemoryStatus.ACTIVE      # shown, not yet written
    assert shard.flush_touches(now_ms=clock()) == 1
    assert shard.store.get(soon.memory_id).status == MemoryStatus.EXPIRED     # persisted by the flush
    assert ops(shard)[-1] == AuditOp.EXPIRE


def test_touch_counts_known_ids_once_each_and_returns_the_unknown(tmp_path: Path) -> None:
    clock = Clock()
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    (a,) = write(shard, [MemoryInput(content="alpha")], now_ms=T0)
    count, missing = memories.touch(shard, [a.memory_id, a.memory_id, "m-gone"], key_id="k1",
                                    now_ms=clock.advance(DAY_MS))
    assert (count, missing) == (1, ["m-gone"])
    assert shard.store.get(a.memory_id).access_count == 0                          # pending until the flush
    assert memories.get(shard, [a.memory_id], now_ms=clock())[0][0].last_access_at_ms == T0 + DAY_MS
    shard.flush_touches(now_ms=clock())
    stored = shard.store.get(a.memory_id)
    assert stored.access_count == 1 and stored.last_access_at_ms == T0 + DAY_MS
    assert AuditOp.USE in ops(shard)


def test_history_follows_supersede_links_and_names_the_live_tip(tmp_path: Path) -> None:
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    (v1,) = write(shard, [MemoryInput(content="budget 3000", key="budget")], now_ms=T0)
    (v2,) = write(shard, [MemoryInput(content="budget 4500", key="budget")], now_ms=T0 + HOUR_MS, seed=1)
    assert v2.superseded == (v1.memory_id,)
    chain, latest = memories.history(shard, v1.memory_id, now_ms=T0 + DAY_MS)
    assert [m.content for m in chain] == ["budget 3000", "budget 4500"] and latest == v2.memory_id
    with pytest.raises(NotFound):
        memories.history(shard, "m-nope", now_ms=T0)


def test_confirm_activates_pending_and_refuses_what_cannot_be_confirmed(tmp_path: Path) -> None:
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    (pending,) = write(shard, [MemoryInput(content="maybe vegan", confidence=0.2)], now_ms=T0)
    assert pending.status == MemoryStatus.PENDING
    (done, superseded), = memories.confirm(shard, [pending.memory_id], key_id="k", now_ms=T0 + 1)
    assert done.status == MemoryStatus.ACTIVE and superseded == ()
    with pytest.raises(NotFound):
        memories.confirm(shard, ["m-nope"], key_id="k", now_ms=T0)
    with shard.write_lock:
        shard.apply(updates=[dataclasses.replace(done, status=MemoryStatus.ARCHIVED)])
    with pytest.raises(FailedPrecondition):
        memories.confirm(shard, [pending.memory_id], key_id="k", now_ms=T0 + 2)


def test_forget_dry_run_changes_nothing_archive_keeps_and_delete_purges_and_relinks(tmp_path: Path) -> None:
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    (a, b) = write(shard, [MemoryInput(content="trip to Rome", type=MemoryType.EPISODIC, created_at_ms=T0 - 9 * DAY_MS),
                           MemoryInput(content="likes tea", created_at_ms=T0)], now_ms=T0)
    (c,) = write(shard, [MemoryInput(content="trip to Oslo", type=MemoryType.EPISODIC, supersedes=(a.memory_id,))],
                 now_ms=T0, seed=1)
    with pytest.raises(InvalidArgument):
        memories.forget(shard, ForgetSpec(filter=Filter()), key_id="k", now_ms=T0)   # no filter, age or all
    spec = ForgetSpec(filter=Filter(types=frozenset({MemoryType.EPISODIC})), older_than_ms=7 * DAY_MS,
                      mode=ForgetMode.DELETE, dry_run=True)
    before = shard.store.seq
    assert memories.forget(shard, spec, key_id="k", now_ms=T0) == (1, [a.memory_id])
    assert shard.store.seq == before and shard.store.get(a.memory_id) is not None
    archived = dataclasses.replace(spec, mode=ForgetMode.ARCHIVE, dry_run=False, filter=Filter(types=frozenset({MemoryType.SEMANTIC})), older_than_ms=0)
    assert memories.forget(shard, archived, key_id="k", now_ms=T0) == (1, [b.memory_id])
    assert shard.store.get(b.memory_id).status == MemoryStatus.ARCHIVED
    deleted = dataclasses.replace(spec, dry_run=False, filter=Filter(types=frozenset({MemoryType.EPISODIC}),
                                                                     statuses=frozenset(MemoryStatus)))
    assert memories.forget(shard, deleted, key_id="k", now_ms=T0) == (1, [a.memory_id])
    assert shard.store.get(a.memory_id) is None
    assert shard.store.get(c.memory_id).supersedes == ()               # the link to the purged memory is gone
    assert AuditOp.DELETE in ops(shard) and AuditOp.ARCHIVE in ops(shard)


def test_delete_reports_unknown_ids_and_a_dropped_shard_answers_not_found(tmp_path: Path) -> None:
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    (a,) = write(shard, [MemoryInput(content="alpha")], now_ms=T0)
    assert memories.delete(shard, [a.memory_id, "m-x"], key_id="k", now_ms=T0) == (1, ["m-x"])
    shard.mark_dropped()
    for call in (lambda: memories.get(shard, [], now_ms=T0), lambda: memories.touch(shard, [], key_id="k", now_ms=T0),
                 lambda: memories.delete(shard, ["m-x"], key_id="k", now_ms=T0),
                 lambda: memories.list(shard, flt=Filter(), page_size=0, page_token="", now_ms=T0)):
        with pytest.raises(NotFound):
            call()


def test_a_purge_empties_the_update_linkers_text_cache(tmp_path: Path) -> None:
    from server.engine import updates

    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    (a, b) = write(shard, [MemoryInput(content="Alex: my car is blue"), MemoryInput(content="Alex: my car is red")],
                   now_ms=T0)
    updates._analysed("Alex: my car is blue"), updates._analysed("Alex: my car is red")
    assert updates._analysed.cache_info().currsize >= 2
    memories.delete(shard, ["m-unknown"], key_id="k", now_ms=T0)      # nothing purged: the cache stays
    assert updates._analysed.cache_info().currsize >= 2
    memories.delete(shard, [a.memory_id], key_id="k", now_ms=T0)
    assert updates._analysed.cache_info().currsize == 0
    updates._analysed("Alex: my car is red")
    spec = ForgetSpec(filter=Filter(), all=True, mode=ForgetMode.DELETE)
    assert memories.forget(shard, spec, key_id="k", now_ms=T0) == (1, [b.memory_id])
    assert updates._analysed.cache_info().currsize == 0


def test_list_pages_in_doc_order_and_refuses_foreign_tokens(tmp_path: Path) -> None:
    shard = make_shard(tmp_path / "t")
    memories = Memories(config=config())
    write(shard, [MemoryInput(content=f"note {i}") for i in range(5)], now_ms=T0)
    first = memories.list(shard, flt=Filter(), page_size=2, page_token="", now_ms=T0)
    second = memories.list(shard, flt=Filter(), page_size=10, page_token=first.next_token, now_ms=T0)
    assert [m.content for m in first.memories + second.memories] == [f"note {i}" for i in range(5)]
    assert second.next_token == ""
    with pytest.raises(InvalidArgument):
        memories.list(shard, flt=Filter(), page_size=0, page_token="bm9wZQ", now_ms=T0)
    with pytest.raises(InvalidArgument):
        memories.list(shard, flt=Filter(), page_size=10**6, page_token="", now_ms=T0)
