"""The memory RPCs on one tenant's shard, after authorization: get, list, history, confirm, touch, forget,
delete, the audit log's pages, and what follows a committed write (its audit lines and the capacity cap).

Methods named ``*_locked`` expect the caller to hold ``shard.write_lock``; the others take it themselves.
All of them are synchronous: the facade runs the ones that touch the disk on executor threads.

Decisions: an access is a use: the first ``recall.ACCESS_TOP_HITS`` hits of a live search (what enters a
prompt) or an explicit Touch; Get, List, History and the rest of a hit list do not count. Forget ARCHIVE
keeps memories (status ARCHIVED, listable, searchable by status); Forget DELETE purges them and then
rewrites the tenant's log, so no byte of a purged memory stays in the store.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from server.config import ServerConfig
from server.domain import (LIVE_STATUSES, AuditEntry, AuditOp, AuditRef, Filter, ForgetMode, ForgetSpec, Memory, MemoryInput,
                           MemoryStatus, WriteOutcome, WriteResult, effective_status)
from server.engine.idempotent import Call, confirm_answer, count_answer
from server.engine.validation import validate_filter
from server.engine import updates as update_links
from server.engine.write import Staging, activate
from server.errors import FailedPrecondition, InvalidArgument, NotFound
from server.store.audit import refs_of
from server.tenants.shard import TenantShard

log = logging.getLogger(__name__)

MAX_LISTED_IDS = 1000


@dataclass(frozen=True)
class Page:
    memories: list[Memory]
    next_token: str


class Memories:
    def __init__(self, *, config: ServerConfig) -> None:
        self.config = config
        self.memory = config.memory

    # -- reads --------------------------------------------------------------------------------------
    def get(self, shard: TenantShard, memory_ids: Sequence[str], *, now_ms: int) -> tuple[list[Memory], list[str]]:
        found: list[Memory] = []
        missing: list[str] = []
        for memory_id in memory_ids:
            memory = shard.store.get(memory_id)
            if memory is None:
                missing.append(memory_id)
            else:
                found.append(memory)
        shard.check_live()
        return [shard.view(m, now_ms=now_ms) for m in found], missing

    def list(self, shard: TenantShard, *, flt: Filter, page_size: int, page_token: str, now_ms: int) -> Page:
        limit = self.config.limits.max_page_size
        if not 0 <= page_size <= limit:
            raise InvalidArgument(f"page_size must be in [0, {limit}]")
        size = page_size or 100
        after = decode_token(page_token)
        memories = sorted((m for m in shard.store.all()
                           if m.doc_id > after and flt.matches(m, statuses=flt.statuses, now_ms=now_ms)),
                          key=lambda m: m.doc_id)
        page = memories[:size]
        token = encode_token(page[-1].doc_id) if len(memories) > size else ""
        shard.check_live()
        return Page(memories=[shard.view(m, now_ms=now_ms) for m in page], next_token=token)

    def history(self, shard: TenantShard, memory_id: str, *, now_ms: int) -> tuple[list[Memory], str]:
        start = shard.store.get(memory_id)
        if start is None:
            raise NotFound(f"memory {memory_id!r} does not exist")
        seen: dict[str, Memory] = {}
        todo = [start]
        while todo:
            m = todo.pop()
            if m.memory_id in seen:
                continue
            seen[m.memory_id] = m
            for other in (*m.supersedes, m.superseded_by, *m.updates, m.updated_by):
                found = shard.store.get(other) if other else None
                if found is not None and found.memory_id not in seen:
                    todo.append(found)
        chain = sorted(seen.values(), key=lambda m: (m.created_at_ms, m.doc_id))
        shard.check_live()
        views = [shard.view(m, now_ms=now_ms) for m in chain]
        tips = [m for m in views if not m.superseded_by and not m.updated_by]
        latest = next((m for m in reversed(tips) if m.status in LIVE_STATUSES), tips[-1] if tips else views[-1])
        return views, latest.memory_id

    def audit_page(self, shard: TenantShard, *, page_size: int, page_token: str, ops: frozenset[AuditOp],
                   memory_id: str) -> tuple[list[AuditEntry], str]:
        limit = self.config.limits.max_page_size
        if not 0 <= page_size <= limit:
            raise InvalidArgument(f"page_size must be in [0, {limit}]")
        entries, offset = shard.audit.read(after=decode_token(page_token), limit=page_size or 100, ops=ops,
                                           memory_id=memory_id)
        shard.check_live()
        return entries, encode_token(offset) if offset >= 0 else ""

    # -- uses ---------------------------------------------------------------------------------------
    def touch(self, shard: TenantShard, memory_ids: Sequence[str], *, key_id: str,
              now_ms: int) -> tuple[int, list[str]]:
        """An explicit "used" signal (the Touch RPC): each known id counts as one access, committed by the
        next flush like a search's; unknown ids are returned and change nothing."""
        shard.check_live()
        looked_up = {i: shard.store.get(i) for i in dict.fromkeys(memory_ids)}
        found = [m for m in looked_up.values() if m is not None]
        missing = [i for i, m in looked_up.items() if m is None]
        shard.record_uses((m.memory_id for m in found), now_ms=now_ms)
        shard.log_audit(AuditOp.USE, refs_of(found), at_ms=now_ms, key_id=key_id)
        return len(found), missing

    # -- after a write ------------------------------------------------------------------------------
    def after_write_locked(self, shard: TenantShard, inputs: Sequence[MemoryInput], results: Sequence[WriteResult],
                           *, key_id: str, now_ms: int) -> None:
        """Audit lines for a committed write, then the capacity cap."""
        get = shard.store.get
        created = [m for r in results if r.outcome != WriteOutcome.MERGED and (m := get(r.memory_id)) is not None]
        shard.log_audit(AuditOp.WRITE, refs_of(created), at_ms=now_ms, key_id=key_id)
        merged = [AuditRef(memory_id=r.merged_into, source_refs=(inp.source_ref,) if inp.source_ref else ())
                  for inp, r in zip(inputs, results, strict=True) if r.outcome == WriteOutcome.MERGED]
        shard.log_audit(AuditOp.MERGE, merged, at_ms=now_ms, key_id=key_id)
        _audit_superseded(shard, [(r.memory_id, r.superseded) for r in results], key_id=key_id, now_ms=now_ms)
        shard.log_audit(AuditOp.UPDATE_LINK, [AuditRef(memory_id=old, related_id=r.memory_id) for r in results
                                              for old in r.updates], at_ms=now_ms, key_id=key_id, note="write")
        self.enforce_capacity_locked(shard, keep={r.memory_id for r in results}, now_ms=now_ms)

    def decayed_importance(self, m: Memory, *, now_ms: int) -> float:
        half_life = self.config.scoring.half_lives()[m.type.name]
        if m.pinned or half_life <= 0:
            return m.importance
        return m.importance * 0.5 ** (max(0.0, (now_ms - m.last_access_at_ms) / 1000.0) / half_life)

    def enforce_capacity_locked(self, shard: TenantShard, *, keep: set[str], now_ms: int) -> list[str]:
        """Archives the least valuable dynamic memories (lowest decayed importance, then least recently
        used) until at most ``capacity_per_tenant`` are live. Pinned memories and ``keep`` (the write just
        acknowledged) are never archived, so the cap can be exceeded when only those remain."""
        cap = self.memory.capacity_per_tenant
        if cap <= 0 or len(shard.store) <= cap:
            return []
        live = [m for m in shard.store.all() if m.status in LIVE_STATUSES]
        excess = len(live) - cap
        if excess <= 0:
            return []
        candidates = sorted((m for m in live if not m.pinned and m.memory_id not in keep),
                            key=lambda m: (self.decayed_importance(m, now_ms=now_ms), m.last_access_at_ms, m.doc_id))
        doomed = [dataclasses.replace(m, status=MemoryStatus.ARCHIVED, updated_at_ms=now_ms)
                  for m in candidates[:excess]]
        if doomed:
            shard.apply(updates=doomed)
            shard.log_audit(AuditOp.ARCHIVE, refs_of(doomed), at_ms=now_ms, note="capacity")
        return [m.memory_id for m in doomed]

    # -- confirmation, forgetting, deletes -------------------------------------------------------------
    def confirm(self, shard: TenantShard, memory_ids: Sequence[str], *, key_id: str, now_ms: int,
                call: Call | None = None) -> list[tuple[Memory, tuple[str, ...]]]:
        """``call``: an idempotent call (server/engine/idempotent.py): its answer is committed with the change.
        The same for ``forget`` and ``delete``."""
        with shard.write_lock:
            shard.check_live()
            staging = Staging(shard)
            for memory_id in memory_ids:
                m = staging.current(memory_id)
                if m is None:
                    raise NotFound(f"memory {memory_id!r} does not exist")
                if effective_status(m, now_ms) not in (MemoryStatus.PENDING, MemoryStatus.ACTIVE):
                    raise FailedPrecondition(f"memory {memory_id!r} is {effective_status(m, now_ms).name}; "
                                             "only PENDING memories can be confirmed")
            done = []
            for memory_id in dict.fromkeys(memory_ids):
                m = staging.current(memory_id)
                superseded = activate(staging, memory_id, now_ms=now_ms) if m and m.status == MemoryStatus.PENDING else ()
                done.append((memory_id, superseded))
            answered = dict(done)
            shard.apply(updates=list(staging.updates.values()), done=None if call is None else call.done(
                confirm_answer([(i, answered[i]) for i in memory_ids]), at_ms=now_ms))
            final = {i: (shard.store.get(i), s) for i, s in done}
            shard.log_audit(AuditOp.CONFIRM, refs_of([m for m, _ in final.values() if m]), at_ms=now_ms, key_id=key_id)
            _audit_superseded(shard, done, key_id=key_id, now_ms=now_ms)
        return [final[i] for i in memory_ids]  # type: ignore[misc]

    def link_update(self, shard: TenantShard, memory_id: str, updates_id: str, *, unlink: bool, key_id: str,
                    now_ms: int, note: str = "link_update") -> tuple[Memory, Memory]:
        """Links ``memory_id`` as the update of ``updates_id`` (the older memory), or with ``unlink`` removes that
        link (a wrong one the write's linker made: server/engine/updates.py). Audited; returns both memories."""
        if memory_id == updates_id:
            raise InvalidArgument("memory_id and updates_id must differ")
        with shard.write_lock:
            shard.check_live()
            staging = Staging(shard)
            new, old = staging.current(memory_id), staging.current(updates_id)
            for mid, m in ((memory_id, new), (updates_id, old)):
                if m is None:
                    raise NotFound(f"memory {mid!r} does not exist")
            assert new is not None and old is not None
            if unlink:
                if old.updated_by != memory_id and updates_id not in new.updates:
                    raise FailedPrecondition(f"memory {memory_id!r} does not update {updates_id!r}")
                update_links.unlink(staging, memory_id, updates_id, now_ms=now_ms)
            else:
                if old.updated_by == memory_id:
                    return shard.view(new, now_ms=now_ms), shard.view(old, now_ms=now_ms)   # already linked
                if old.updated_by:
                    raise FailedPrecondition(f"memory {updates_id!r} is already updated by {old.updated_by!r}; "
                                             "unlink it first")
                if _reaches(shard, updates_id, memory_id):
                    raise InvalidArgument(f"memory {updates_id!r} already updates {memory_id!r} (directly or not)")
                update_links.link(staging, memory_id, updates_id, now_ms=now_ms)
            shard.apply(updates=list(staging.updates.values()))
            shard.log_audit(AuditOp.UNLINK if unlink else AuditOp.UPDATE_LINK,
                            [AuditRef(memory_id=updates_id, related_id=memory_id)], at_ms=now_ms, key_id=key_id,
                            note=note)
            new, old = shard.store.get(memory_id), shard.store.get(updates_id)
            assert new is not None and old is not None
            return shard.view(new, now_ms=now_ms), shard.view(old, now_ms=now_ms)

    def forget(self, shard: TenantShard, spec: ForgetSpec, *, key_id: str, now_ms: int,
               call: Call | None = None) -> tuple[int, list[str]]:
        validate_filter(spec.filter, where="filter")
        if spec.older_than_ms < 0:
            raise InvalidArgument("older_than_ms must be >= 0")
        if spec.filter == Filter() and not spec.older_than_ms and not spec.all:
            raise InvalidArgument("forget needs a filter or older_than_ms; set all=true to forget every memory")
        statuses = spec.filter.statuses or (LIVE_STATUSES if spec.mode == ForgetMode.ARCHIVE else frozenset())
        cutoff = now_ms - spec.older_than_ms if spec.older_than_ms else 0
        with shard.write_lock:
            shard.check_live()
            chosen = sorted((m for m in shard.store.all()
                             if spec.filter.matches(m, statuses=statuses, now_ms=now_ms)
                             and (spec.include_pinned or not m.pinned) and (not cutoff or m.created_at_ms < cutoff)
                             and not (spec.mode == ForgetMode.ARCHIVE and m.status == MemoryStatus.ARCHIVED)),
                            key=lambda m: m.doc_id)
            ids = [m.memory_id for m in chosen]
            answer = (len(ids), ids[:MAX_LISTED_IDS])
            done = None if call is None or spec.dry_run else call.done(count_answer(answer), at_ms=now_ms)
            if spec.dry_run or not chosen:
                if done is not None:
                    shard.apply(done=done)   # nothing to forget: the answer alone
                return answer
            if spec.mode == ForgetMode.DELETE:
                shard.purge_locked(ids, key_id=key_id, now_ms=now_ms, compact=True, note="forget", done=done)
                update_links.forget_texts()   # no purged text stays in the linker's cache
            else:
                archived = [dataclasses.replace(m, status=MemoryStatus.ARCHIVED, updated_at_ms=now_ms) for m in chosen]
                shard.apply(updates=archived, done=done)
                shard.log_audit(AuditOp.ARCHIVE, refs_of(archived), at_ms=now_ms, key_id=key_id, note="forget")
        if spec.mode == ForgetMode.DELETE:
            shard.save_dense_snapshot()   # an IVF snapshot on disk must not keep the purged vectors
        return answer

    def delete(self, shard: TenantShard, memory_ids: Sequence[str], *, key_id: str, now_ms: int,
               call: Call | None = None) -> tuple[int, list[str]]:
        with shard.write_lock:
            shard.check_live()
            missing = [i for i in memory_ids if shard.store.get(i) is None]
            found = len(dict.fromkeys(i for i in memory_ids if shard.store.get(i) is not None))
            done = None if call is None else call.done(count_answer((found, missing)), at_ms=now_ms)
            purged = shard.purge_locked(memory_ids, key_id=key_id, now_ms=now_ms, compact=False, done=done)
            if purged:
                update_links.forget_texts()   # no purged text stays in the linker's cache
            return purged, missing


def _audit_superseded(shard: TenantShard, superseded: Sequence[tuple[str, Sequence[str]]], *, key_id: str,
                      now_ms: int) -> None:
    """SUPERSEDE lines: each (new memory id, the ids it superseded)."""
    get = shard.store.get
    refs = [AuditRef(memory_id=old, source_refs=tuple(m.source_refs) if (m := get(old)) else (), related_id=new)
            for new, olds in superseded for old in olds]
    shard.log_audit(AuditOp.SUPERSEDE, refs, at_ms=now_ms, key_id=key_id)


def _reaches(shard: TenantShard, start: str, target: str) -> bool:
    """True when ``start`` updates ``target`` through a chain of update links (a new link would close a cycle)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        m = shard.store.get(todo.pop())
        if m is None or m.memory_id in seen:
            continue
        seen.add(m.memory_id)
        if target in m.updates:
            return True
        todo.extend(m.updates)
    return False


def encode_token(doc_id: int) -> str:
    return base64.urlsafe_b64encode(f"d{doc_id}".encode()).decode()


def decode_token(token: str) -> int:
    if not token:
        return 0
    try:
        raw = base64.urlsafe_b64decode(token.encode()).decode()
        if not raw.startswith("d"):
            raise ValueError(raw)
        return int(raw[1:])
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument("page_token is not one this server issued") from exc
