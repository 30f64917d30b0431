"""Wire ↔ domain conversion: one function per message, and the only module that knows both sides."""

from __future__ import annotations

import dataclasses
from typing import Any

from server.domain import (AuditEntry, AuditOp, Breakdown, ConsolidationReport, Extraction, Filter, ForgetMode,
                           ForgetSpec, Hit, Memory, MemoryInput, MemoryStatus, MemoryType, QueryResult, Scoring,
                           SearchQuery, Timings, WriteOutcome, WriteResult)
from server.batching.controller import ControllerState
from server.errors import InvalidArgument
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.tenants.settings import TenantSettings


def memory_type_from_pb(value: int, *, where: str, allow_unspecified: bool) -> MemoryType | None:
    if value == pb.MEMORY_TYPE_UNSPECIFIED:
        if allow_unspecified:
            return None
        raise InvalidArgument(f"{where} must not be MEMORY_TYPE_UNSPECIFIED")
    try:
        return MemoryType(value)
    except ValueError:
        raise InvalidArgument(f"{where}: unknown memory type {value}") from None


def memory_status_from_pb(value: int, *, where: str) -> MemoryStatus:
    try:
        return MemoryStatus(value)
    except ValueError:
        raise InvalidArgument(f"{where}: unknown memory status {value}") from None


def memory_input_from_pb(m: pb.MemoryInput, *, where: str = "memory") -> MemoryInput:
    return MemoryInput(
        content=m.content,
        type=memory_type_from_pb(m.type, where=f"{where}.type", allow_unspecified=True) or MemoryType.SEMANTIC,
        importance=m.importance if m.HasField("importance") else None,
        created_at_ms=m.created_at_ms, entities=tuple(m.entities), source_ref=m.source_ref, scope=m.scope,
        confidence=m.confidence if m.HasField("confidence") else None, key=m.key,
        supersedes=tuple(m.supersedes), pinned=m.pinned, expires_at_ms=m.expires_at_ms,
        metadata=dict(m.metadata), last_access_at_ms=m.last_access_at_ms, context=m.context)


def filter_from_pb(f: pb.Filter, *, where: str = "filter") -> Filter:
    for name in ("created_after_ms", "created_before_ms", "accessed_after_ms", "accessed_before_ms"):
        if getattr(f, name) < 0:
            raise InvalidArgument(f"{where}.{name} must be >= 0")
    return Filter(
        types=frozenset(memory_type_from_pb(t, where=f"{where}.types", allow_unspecified=False)  # type: ignore[misc]
                        for t in f.types),
        statuses=frozenset(memory_status_from_pb(s, where=f"{where}.statuses") for s in f.statuses),
        scope=f.scope if f.HasField("scope") else None,
        entities_any=frozenset(f.entities_any), entities_all=frozenset(f.entities_all),
        key=f.key if f.HasField("key") else None,
        created_after_ms=f.created_after_ms, created_before_ms=f.created_before_ms,
        accessed_after_ms=f.accessed_after_ms, accessed_before_ms=f.accessed_before_ms,
        min_importance=f.min_importance if f.HasField("min_importance") else None)


def scoring_from_pb(s: pb.Scoring) -> Scoring:
    def opt(name: str) -> Any:
        return getattr(s, name) if s.HasField(name) else None

    return Scoring(disable_decay=s.disable_decay, disable_importance=s.disable_importance,
                   episodic_half_life_s=opt("episodic_half_life_s"), semantic_half_life_s=opt("semantic_half_life_s"),
                   procedural_half_life_s=opt("procedural_half_life_s"), importance_weight=opt("importance_weight"),
                   now_ms=s.now_ms, decay_floor=opt("decay_floor"), recency_weight=opt("recency_weight"),
                   disable_temporal=s.disable_temporal)


def query_from_pb(q: pb.SearchQuery, *, where: str = "query") -> SearchQuery:
    return SearchQuery(
        text=q.text, top_k=q.top_k, filter=filter_from_pb(q.filter, where=f"{where}.filter"),
        include_history=q.include_history, include_pending=q.include_pending, rerank_depth=q.rerank_depth,
        scoring=scoring_from_pb(q.scoring), candidates=q.candidates, context_block=q.context_block,
        context_items=q.context_items, lexical_only=q.lexical_only, dense_only=q.dense_only,
        min_relevance=q.min_relevance if q.HasField("min_relevance") else None, gate=q.gate,
        feedback=q.feedback if q.HasField("feedback") else None)


def memory_to_pb(m: Memory) -> pb.Memory:
    return pb.Memory(
        memory_id=m.memory_id, content=m.content, type=int(m.type), importance=m.importance,
        created_at_ms=m.created_at_ms, last_access_at_ms=m.last_access_at_ms, access_count=m.access_count,
        entities=list(m.entities), source_ref=m.source_ref, scope=m.scope, confidence=m.confidence, key=m.key,
        status=int(m.status), supersedes=list(m.supersedes), superseded_by=m.superseded_by, pinned=m.pinned,
        expires_at_ms=m.expires_at_ms, metadata=dict(m.metadata), source_refs=list(m.source_refs),
        updated_at_ms=m.updated_at_ms, context=m.context, salience=m.salience, normalized=m.normalized,
        consolidated_into=m.consolidated_into, consolidates=list(m.consolidates), updates=list(m.updates),
        updated_by=m.updated_by)


def breakdown_to_pb(b: Breakdown) -> pb.ScoreBreakdown:
    out = pb.ScoreBreakdown(dense_rank=b.dense_rank, dense_score=b.dense_score, bm25_rank=b.bm25_rank,
                            bm25_score=b.bm25_score, rrf=b.rrf, relevance=b.relevance, decay=b.decay,
                            importance_weight=b.importance_weight, final=b.final, recency=b.recency,
                            temporal=b.temporal, update=b.update, time_intent=int(b.time_intent))
    if b.rerank is not None:
        out.rerank = b.rerank
    return out


def hit_to_pb(h: Hit) -> pb.Hit:
    out = pb.Hit(memory=memory_to_pb(h.memory), breakdown=breakdown_to_pb(h.breakdown))
    out.breakdown.salience = h.memory.salience   # what set the importance a writer left unset
    return out


def timings_to_pb(t: Timings) -> pb.Timings:
    return pb.Timings(queue_ns=t.queue_ns, embed_ns=t.embed_ns, ann_ns=t.ann_ns, bm25_ns=t.bm25_ns,
                      fusion_ns=t.fusion_ns, rerank_ns=t.rerank_ns, decay_ns=t.decay_ns, total_ns=t.total_ns,
                      batch_size=t.batch_size, rerank_depth_used=t.rerank_depth_used)


def query_result_to_pb(r: QueryResult) -> pb.QueryResult:
    return pb.QueryResult(hits=[hit_to_pb(h) for h in r.hits], timings=timings_to_pb(r.timings),
                          context_block=r.context_block, skipped=r.skipped)


def write_result_to_pb(r: WriteResult) -> spb.WriteResult:
    return spb.WriteResult(memory_id=r.memory_id, outcome=int(r.outcome), merged_into=r.merged_into,
                           superseded=list(r.superseded), salience=r.salience, updates=list(r.updates),
                           status=int(r.status) if r.outcome != WriteOutcome.SKIPPED else 0)


def model_info_to_pb(d: dict[str, Any]) -> pb.ModelInfo:
    return pb.ModelInfo(name=str(d.get("name", "")), path=str(d.get("path", "")), device=str(d.get("device", "")),
                        dtype=str(d.get("dtype", "")), provenance=str(d.get("provenance", "")),
                        dim=int(d.get("dim") or 0))


def info_to_pb(info: dict[str, Any], *, version: str) -> spb.InfoResponse:
    limits, batching = info["limits"], info["batching"]
    out = spb.InfoResponse(
        version=version, device=info["device"], embedder=model_info_to_pb(info["embedder"]),
        limits=pb.Limits(max_memories_per_write=limits.max_memories_per_write,
                         max_content_bytes=limits.max_content_bytes,
                         max_queries_per_search=limits.max_queries_per_search, max_top_k=limits.max_top_k,
                         max_candidates=limits.max_candidates, max_page_size=limits.max_page_size,
                         max_query_bytes=limits.max_query_bytes, max_entities=limits.max_entities,
                         max_metadata_entries=limits.max_metadata_entries, queue_capacity=batching.queue_capacity),
        batching=pb.Batching(enabled=batching.enabled, max_batch_requests=batching.max_batch_requests,
                             max_batch_tokens=batching.max_batch_tokens, max_wait_ms=batching.max_wait_ms),
        rrf_k=info["rrf_k"], half_life_s=info["half_life_s"])
    if info.get("reranker"):
        out.reranker.CopyFrom(model_info_to_pb(info["reranker"]))
    if info.get("rerank_control") is not None:
        out.rerank_control.CopyFrom(rerank_control_to_pb(info["rerank_control"]))
    return out


def rerank_control_to_pb(s: ControllerState) -> pb.RerankControl:
    return pb.RerankControl(target_ms=s.target_ms, full_depth=s.full_depth, depth=s.depth, ms_per_pair=s.ms_per_pair,
                            ms_per_query=s.ms_per_query, device=s.device, batches_full=s.batches_full,
                            batches_reduced=s.batches_reduced, batches_skipped=s.batches_skipped,
                            idle_threads=s.idle_threads, batches_wide=s.batches_wide, ms_per_pair_wide=s.ms_per_pair_wide,
                            load_scale=s.load_scale, tail_p95_ms=s.tail_p95_ms)


def stats_to_pb(d: dict[str, Any]) -> spb.StatsResponse:
    tenants = [spb.TenantStats(tenant_id=t["tenant_id"], state=t["state"], memories=t.get("memories", 0),
                               dense_tier=t.get("dense_tier", ""), dense_index=t.get("dense_index", ""),
                               ram_bytes=t.get("ram_bytes", 0), idle_s=t.get("idle_s", 0.0),
                               load_ms=t.get("load_ms", 0.0), log_bytes=t.get("log_bytes", 0),
                               live_bytes=t.get("live_bytes", 0), compactions=t.get("compactions", 0),
                               lexical_stale=t.get("lexical_stale", False), queued=t.get("queued", 0),
                               rejected=t.get("rejected", 0), replica=t.get("replica", "")) for t in d["tenants"]]
    replicas = [spb.ReplicaStats(replica=r["replica"], node_id=r["node_id"], pid=r["pid"],
                                 loaded_tenants=r["loaded_tenants"], used_bytes=r["used_bytes"],
                                 rss_bytes=r["rss_bytes"], disk_bytes=r["disk_bytes"]) for r in d.get("replicas", ())]
    return spb.StatsResponse(total_tenants=d["total_tenants"], loaded_tenants=d["loaded_tenants"],
                             memory_budget_bytes=d["memory_budget_bytes"], used_bytes=d["used_bytes"],
                             loads=d["loads"], evictions=d["evictions"], load_ms_total=d["load_ms_total"],
                             evict_ms_total=d["evict_ms_total"], tenants=tenants,
                             storage=storage_to_pb(d["storage"]) if "storage" in d else None, replicas=replicas)


def storage_to_pb(d: dict[str, Any]) -> spb.StorageStats:
    top = [spb.TenantDiskUsage(tenant_id=u["tenant_id"], log_bytes=u["log_bytes"], audit_bytes=u["audit_bytes"])
           for u in d["top_tenants"]]
    return spb.StorageStats(free_bytes=d["free_bytes"], total_bytes=d["total_bytes"], min_free_bytes=d["min_free_bytes"],
                            low=d["low"], writes_refused=d["writes_refused"], full_events=d["full_events"],
                            log_bytes=d["log_bytes"], audit_bytes=d["audit_bytes"], compactions=d["compactions"],
                            top_tenants=top)


def idempotency_key_from_pb(r: spb.WriteRequest | spb.DeleteRequest | spb.ConfirmRequest | spb.ForgetRequest) -> str:
    """The request's idempotency key ("": none). The engine validates it (length, charset) for every frontend
    and answers a bad one with INVALID_ARGUMENT (server/engine/idempotent.py)."""
    return r.idempotency_key


def forget_from_pb(r: spb.ForgetRequest) -> ForgetSpec:
    if r.mode not in (spb.FORGET_MODE_UNSPECIFIED, spb.FORGET_MODE_ARCHIVE, spb.FORGET_MODE_DELETE):
        raise InvalidArgument(f"mode: unknown forget mode {r.mode}")
    return ForgetSpec(filter=filter_from_pb(r.filter), older_than_ms=r.older_than_ms,
                      mode=ForgetMode.DELETE if r.mode == spb.FORGET_MODE_DELETE else ForgetMode.ARCHIVE,
                      include_pinned=r.include_pinned, all=r.all, dry_run=r.dry_run)


def audit_ops_from_pb(ops: Any) -> frozenset[AuditOp]:
    try:
        return frozenset(AuditOp(op) for op in ops)
    except ValueError:
        raise InvalidArgument("ops: unknown audit op") from None


def audit_entry_to_pb(e: AuditEntry) -> spb.AuditEntry:
    return spb.AuditEntry(entry_id=e.entry_id, at_ms=e.at_ms, op=int(e.op), query=e.query, key_id=e.key_id,
                          note=e.note, refs=[spb.AuditRef(memory_id=r.memory_id, source_refs=list(r.source_refs),
                                                          related_id=r.related_id) for r in e.refs])


def write_response_to_pb(results: list[WriteResult]) -> spb.WriteResponse:
    return spb.WriteResponse(results=[write_result_to_pb(r) for r in results],
                             skipped=sum(r.outcome == WriteOutcome.SKIPPED for r in results))


def consolidate_to_pb(report: ConsolidationReport) -> spb.ConsolidateResponse:
    return spb.ConsolidateResponse(
        clusters=len(report.clusters), consolidated=sum(len(c.members) for c in report.clusters),
        restored=report.restored,
        consolidations=[spb.Consolidation(memory_id=c.memory_id, consolidates=list(c.members), content=c.content)
                        for c in report.clusters])


def settings_values_from_pb(s: spb.TenantSettings) -> dict[str, float]:
    """The fields an UpdateSettings request sets (an unset optional field is left as it is)."""
    return {f.name: float(getattr(s, f.name)) for f in s.DESCRIPTOR.fields if s.HasField(f.name)}


def settings_to_pb(tenant_id: str, own: TenantSettings, effective: TenantSettings) -> spb.SettingsResponse:
    def one(t: TenantSettings) -> spb.TenantSettings:
        return spb.TenantSettings(**{k: v for k, v in dataclasses.asdict(t).items() if v is not None})

    return spb.SettingsResponse(tenant_id=tenant_id, settings=one(own), effective=one(effective))


def extraction_to_pb(e: Extraction) -> spb.ExtractResponse:
    return spb.ExtractResponse(memory_ids=list(e.memory_ids), facts=e.facts, pending=e.pending)


def history_to_pb(versions: list[Memory], latest_id: str) -> spb.HistoryResponse:
    return spb.HistoryResponse(versions=[memory_to_pb(m) for m in versions], latest_id=latest_id)


def link_update_to_pb(memory: Memory, updated: Memory) -> spb.LinkUpdateResponse:
    return spb.LinkUpdateResponse(memory=memory_to_pb(memory), updated=memory_to_pb(updated))


def confirm_to_pb(results: list[tuple[Memory, tuple[str, ...]]]) -> spb.ConfirmResponse:
    return spb.ConfirmResponse(results=[spb.ConfirmResult(memory=memory_to_pb(m), superseded=list(s))
                                        for m, s in results])
