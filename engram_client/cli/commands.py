"""The CLI's client commands (tenant, key, write, search, import, export, stats, audit), built on the SDK.

Each command takes the parsed arguments and an open :class:`EngramClient`, writes its result to stdout
and returns an exit code. Imports only the SDK's dependencies, so ``engram search`` starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from engram_client.cli.io import age, memory_record, table
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from engram_client import EngramClient


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _json(message: Message | dict[str, Any]) -> str:
    data = message if isinstance(message, dict) else json_format.MessageToDict(
        message, preserving_proto_field_name=True)
    return json.dumps(data, ensure_ascii=False, indent=2)


def _short(enum: Any, value: int, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix).lower()


def _filter(args: argparse.Namespace) -> dict[str, Any]:
    flt: dict[str, Any] = {}
    if getattr(args, "type", None):
        flt["types"] = args.type
    if getattr(args, "entity", None):
        flt["entities_any"] = args.entity
    if getattr(args, "status", None):
        flt["statuses"] = args.status
    return flt


# -- tenants and keys -------------------------------------------------------------------------------------
def tenant_create(args: argparse.Namespace, client: EngramClient) -> int:
    reply = client.create_tenant(args.tenant)
    _out(f"created tenant {reply.tenant_id}")
    return 0


def tenant_list(args: argparse.Namespace, client: EngramClient) -> int:
    for tenant in client.list_tenants():
        _out(tenant)
    return 0


def tenant_delete(args: argparse.Namespace, client: EngramClient) -> int:
    if not args.yes:
        sys.stderr.write(f"engram: deleting {args.tenant!r} purges every memory it has; add --yes to confirm\n")
        return 2
    reply = client.delete_tenant(args.tenant)
    _out(f"deleted tenant {args.tenant} ({reply.deleted_memories} memories)")
    return 0


def key_create(args: argparse.Namespace, client: EngramClient) -> int:
    reply = client.create_key(args.name, tenant_ids=args.tenant or (), prefixes=args.prefix or (), admin=args.admin)
    _out(f"key_id: {reply.key_id}\nsecret: {reply.secret}\n(the secret is shown once; the server keeps its hash)")
    return 0


def key_revoke(args: argparse.Namespace, client: EngramClient) -> int:
    _out(f"revoked key {client.revoke_key(args.key_id).key_id}")
    return 0


def key_rotate(args: argparse.Namespace, client: EngramClient) -> int:
    reply = client.rotate_key(args.key_id)
    _out(f"key_id: {reply.key_id}\nsecret: {reply.secret}\n(the old secret no longer works)")
    return 0


# -- memories ----------------------------------------------------------------------------------------------
def write(args: argparse.Namespace, client: EngramClient) -> int:
    fields: dict[str, Any] = {"content": args.content, "type": args.type_, "entities": args.entity or [],
                              "source_ref": args.source_ref, "scope": args.scope, "key": args.slot,
                              "pinned": args.pinned}
    if args.importance is not None:
        fields["importance"] = args.importance
    if args.confidence is not None:
        fields["confidence"] = args.confidence
    result = client.write(args.tenant, [{k: v for k, v in fields.items() if v not in ("", None)}]).results[0]
    outcome = _short(spb.WriteOutcome, result.outcome, "WRITE_OUTCOME_")
    merged = f" into {result.merged_into}" if result.merged_into else ""
    skipped = "(not stored: salience below the tenant's min_salience; see engram settings)"
    _out(f"{outcome}{merged}: {result.memory_id or skipped}"
         f" (salience {result.salience:.2f})")
    return 0


def search(args: argparse.Namespace, client: EngramClient) -> int:
    options: dict[str, Any] = {"top_k": args.top_k, "context_block": args.context,
                               "include_pending": args.include_pending}
    if args.rerank_depth is not None:
        options["rerank_depth"] = args.rerank_depth
    if args.gate:
        options["gate"] = True
    result = client.search(args.tenant, args.query, filter=_filter(args) or None, **options)
    if result.skipped:
        _out(f"(no search: {result.skipped})")
        return 0
    if args.json:
        _out(_json(result))
        return 0
    now = int(time.time() * 1000)
    rows = []
    for n, hit in enumerate(result.hits, start=1):
        b, m = hit.breakdown, hit.memory
        rows.append([n, f"{b.final:.3f}", f"{b.relevance:.3f}", _rank(b.dense_rank, b.dense_score),
                     _rank(b.bm25_rank, b.bm25_score), f"{b.rerank:.2f}" if b.HasField("rerank") else "-",
                     f"{b.recency:.3f}", f"{b.importance_weight:.2f}", f"{b.temporal:.2f}", f"{m.salience:.2f}",
                     _short(pb.MemoryType, m.type, "MEMORY_TYPE_"), age(m.created_at_ms, now_ms=now), m.content])
    # final = relev × recency × imp.w × time (README "Ranking")
    _out(table(["#", "final", "relev", "dense", "bm25", "rerank", "recency", "imp.w", "time", "sal.", "type", "age",
                "content"],
               rows)
         if rows else "(no memories matched)")
    t = result.timings
    _out(f"\n{len(rows)} hits in {t.total_ns / 1e6:.1f} ms (queue {t.queue_ns / 1e6:.1f}, embed {t.embed_ns / 1e6:.1f},"
         f" ann {t.ann_ns / 1e6:.1f}, bm25 {t.bm25_ns / 1e6:.1f}, rerank {t.rerank_ns / 1e6:.1f} ms;"
         f" batch of {t.batch_size})")
    if args.context and result.context_block:
        _out("\n" + result.context_block)
    return 0


def _rank(rank: int, score: float) -> str:
    return f"#{rank} {score:.2f}" if rank else "-"


def export(args: argparse.Namespace, client: EngramClient) -> int:
    flt = _filter(args) or {"statuses": ["active", "pending"]}
    out = sys.stdout if args.file in (None, "-") else open(args.file, "w", encoding="utf-8")  # noqa: SIM115
    count = 0
    try:
        for memory in client.iter_memories(args.tenant, filter=flt, page_size=500):
            out.write(json.dumps(memory_record(memory), ensure_ascii=False) + "\n")
            count += 1
    finally:
        if out is not sys.stdout:
            out.close()
    sys.stderr.write(f"exported {count} memories from {args.tenant}\n")
    return 0


# -- operations ----------------------------------------------------------------------------------------------
def info(args: argparse.Namespace, client: EngramClient) -> int:
    _out(_json(client.info()))
    return 0


def stats(args: argparse.Namespace, client: EngramClient) -> int:
    reply = client.stats(args.tenant or "")
    if args.json:
        _out(_json(reply))
        return 0
    data = json_format.MessageToDict(reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    tenants = data.pop("tenants", [])
    width = max((len(k) for k in data), default=0)
    for name, value in data.items():
        _out(f"{name.ljust(width)}  {value}")
    if tenants:
        headers = list(tenants[0])
        _out("\n" + table(headers, [[t.get(h, "") for h in headers] for t in tenants], stretch=0))
    return 0


def audit(args: argparse.Namespace, client: EngramClient) -> int:
    entries = []
    for entry in client.iter_audit(args.tenant, ops=args.op or (), memory_id=args.memory or ""):
        entries.append(entry)
    entries = entries[-args.limit:] if args.limit else entries
    if args.json:
        for entry in entries:
            _out(json.dumps(json_format.MessageToDict(entry, preserving_proto_field_name=True), ensure_ascii=False))
        return 0
    rows = []
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.at_ms / 1000))
        ids = ",".join(r.memory_id for r in e.refs[:3]) + ("…" if len(e.refs) > 3 else "")
        rows.append([e.entry_id, when, _short(spb.AuditOp, e.op, "AUDIT_OP_"), e.key_id or "-", ids,
                     e.query or e.note])
    _out(table(["entry", "at (UTC)", "op", "key", "memories", "query / note"], rows) if rows else "(no entries)")
    return 0
