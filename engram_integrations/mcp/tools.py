"""The MCP tools: one argument model each (its JSON schema is what the model sees; unknown arguments are
refused, so no argument can name a tenant) and one coroutine that runs it through the SDK.

Every tool acts on the session's tenant, which comes from configuration or the key's scope, never from
an argument. Each returns a JSON-ready dict; the server turns gRPC failures into tool errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engram_integrations._records import hit_view, memory_view, now_ms, write_view
from engram_client import AsyncEngramClient
from engram_client.loop import aend_turn

MemoryType = Literal["episodic", "semantic", "procedural"]
MemoryStatus = Literal["active", "pending", "superseded", "expired", "archived"]
Ids = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=1000)]
DAY_MS = 86_400_000


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class RecallArgs(Args):
    query: str = Field(min_length=1, max_length=4096,
                       description="What to remember, in natural language: usually the user's message or the "
                                   "question you need to answer.")
    top_k: int = Field(5, ge=1, le=50, description="How many memories to return, best first.")
    types: list[MemoryType] | None = Field(None, description="Only these kinds of memory.")
    entities_any: list[str] | None = Field(None, description="Only memories tagged with at least one of these "
                                                             "entities (e.g. people, projects).")
    include_pending: bool = Field(False, description="Also return pending (unconfirmed, low-confidence) memories.")
    gate: bool = Field(True, description="Return at once with no memories when the message is plain small talk "
                                         "(greetings, thanks); set false to search anyway.")


class RememberArgs(Args):
    content: str = Field(min_length=1, description="The memory, as one self-contained statement "
                                                   "(e.g. 'Alice is allergic to peanuts').")
    type: MemoryType = Field("semantic", description="semantic: a lasting fact or preference; episodic: "
                                                     "something that happened (fades in days); procedural: "
                                                     "how to do something (never fades).")
    importance: float | None = Field(None, ge=0.0, le=1.0, description="0-1, how much it matters (default 0.5).")
    confidence: float | None = Field(None, ge=0.0, le=1.0,
                                     description="0-1, how sure you are (default 1). Below the server's "
                                                 "threshold (0.5) the memory waits as pending until confirmed.")
    entities: list[str] | None = Field(None, description="People, places, projects it is about.")
    key: str | None = Field(None, max_length=256,
                            description="A slot such as 'diet' or 'budget': a newer memory with the same key "
                                        "and scope supersedes the old one (kept as history).")
    scope: str | None = Field(None, max_length=256, description="Where it applies, e.g. a project name.")
    source_ref: str | None = Field(None, max_length=512,
                                   description="Where it came from, e.g. 'chat-12#4' (conversation and turn).")
    pinned: bool = Field(False, description="Pinned memories never fade.")
    expires_in_days: float | None = Field(None, gt=0, description="Forget it after this many days.")
    supersedes: Ids | None = Field(None, description="Ids of memories this one replaces explicitly.")
    used_memory_ids: Ids | None = Field(None, description="Ids returned by recall that your answer used: they "
                                                          "are marked as used, which keeps them fresh.")


class ForgetArgs(Args):
    memory_ids: Ids | None = Field(None, description="Delete exactly these memories (purged, not archived). "
                                                     "Give either memory_ids or a filter.")
    types: list[MemoryType] | None = Field(None, description="Filter: only these kinds.")
    entities_any: list[str] | None = Field(None, description="Filter: memories tagged with any of these entities.")
    key: str | None = Field(None, description="Filter: memories in this slot.")
    scope: str | None = Field(None, description="Filter: memories with this scope.")
    older_than_days: float | None = Field(None, gt=0, description="Filter: only memories older than this.")
    purge: bool = Field(False, description="Filter mode: delete the matches instead of archiving them "
                                           "(archived memories are kept but no longer recalled).")
    include_pinned: bool = Field(False, description="Filter mode: pinned memories are skipped unless this is set.")
    dry_run: bool = Field(False, description="Filter mode: only count and list what would be forgotten.")


class ConfirmArgs(Args):
    memory_ids: Ids = Field(min_length=1, description="Pending memories to activate.")


class HistoryArgs(Args):
    memory_id: str = Field(min_length=1, max_length=64, description="Any version of the memory.")


class ListArgs(Args):
    types: list[MemoryType] | None = Field(None, description="Only these kinds.")
    statuses: list[MemoryStatus] | None = Field(None, description="Only these statuses (default: every status).")
    entities_any: list[str] | None = Field(None, description="Only memories tagged with any of these entities.")
    key: str | None = Field(None, description="Only memories in this slot.")
    scope: str | None = Field(None, description="Only memories with this scope.")
    page_size: int = Field(20, ge=1, le=100, description="Memories per page.")
    page_token: str | None = Field(None, description="next_page_token from the previous page.")


def _filter(args: Args, *names: str) -> dict[str, Any]:
    return {n: v for n in names if (v := getattr(args, n, None)) not in (None, [], "")}


async def recall(client: AsyncEngramClient, tenant_id: str, args: RecallArgs) -> dict[str, Any]:
    recalled = await client.recall(tenant_id, args.query, top_k=args.top_k, include_pending=args.include_pending,
                                   filter=_filter(args, "types", "entities_any") or None, gate=args.gate)
    at = now_ms()
    out = {"context": recalled.context, "hits": [hit_view(h, at_ms=at) for h in recalled.hits],
           "took_ms": round(recalled.timings.total_ns / 1e6, 3)}
    if recalled.skipped:
        out["skipped"] = recalled.skipped   # the recall gate: no memory needed for this message
    return out


async def remember(client: AsyncEngramClient, tenant_id: str, args: RememberArgs) -> dict[str, Any]:
    memory: dict[str, Any] = {"content": args.content, "type": args.type, "pinned": args.pinned}
    memory.update(_filter(args, "importance", "confidence", "entities", "key", "scope", "supersedes"))
    if args.expires_in_days:
        memory["expires_at_ms"] = now_ms() + int(args.expires_in_days * DAY_MS)
    done = await aend_turn(client, tenant_id, memories=[memory], used_ids=args.used_memory_ids or (),
                           source_ref=args.source_ref or "")
    return {**write_view(done.written[0]), "marked_used": done.used, "missing": done.missing}


async def forget(client: AsyncEngramClient, tenant_id: str, args: ForgetArgs) -> dict[str, Any]:
    flt = _filter(args, "types", "entities_any", "key", "scope")
    if bool(args.memory_ids) == bool(flt or args.older_than_days):
        raise ValueError("give either memory_ids or a filter (types, entities_any, key, scope, older_than_days)")
    if args.memory_ids:
        deleted = await client.delete(tenant_id, args.memory_ids)
        return {"mode": "delete", "count": deleted.deleted, "missing": list(deleted.missing)}
    reply = await client.forget(tenant_id, filter=flt or None, delete=args.purge, include_pinned=args.include_pinned,
                                older_than_ms=int((args.older_than_days or 0) * DAY_MS), dry_run=args.dry_run)
    return {"mode": "delete" if args.purge else "archive", "dry_run": args.dry_run, "count": reply.count,
            "memory_ids": list(reply.memory_ids)}


async def confirm(client: AsyncEngramClient, tenant_id: str, args: ConfirmArgs) -> dict[str, Any]:
    reply = await client.confirm(tenant_id, args.memory_ids)
    at = now_ms()
    return {"confirmed": [{**memory_view(r.memory, at_ms=at), "superseded": list(r.superseded)}
                          for r in reply.results]}


async def history(client: AsyncEngramClient, tenant_id: str, args: HistoryArgs) -> dict[str, Any]:
    reply = await client.history(tenant_id, args.memory_id)
    at = now_ms()
    return {"latest_id": reply.latest_id, "versions": [memory_view(m, at_ms=at) for m in reply.versions]}


async def list_memories(client: AsyncEngramClient, tenant_id: str, args: ListArgs) -> dict[str, Any]:
    page = await client.list_page(tenant_id, filter=_filter(args, "types", "statuses", "entities_any", "key", "scope")
                                  or None, page_size=args.page_size, page_token=args.page_token or "")
    at = now_ms()
    return {"memories": [memory_view(m, at_ms=at) for m in page.memories], "next_page_token": page.next_page_token}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args: type[Args]
    run: Callable[[AsyncEngramClient, str, Any], Awaitable[dict[str, Any]]]
    read_only: bool
    destructive: bool = False

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("recall", "Recall memories",
             "Call before answering: the memories that matter for the query, best first, as a prompt-ready "
             "'context' block plus 'hits' with each memory's id, score (and how it was made) and age. Pass "
             "the ids you used to remember's used_memory_ids.", RecallArgs, recall, read_only=True),
    ToolSpec("remember", "Remember",
             "Call after answering, with what you learned that is worth keeping (one statement per call). "
             "Near-duplicates merge into the existing memory; a memory with the same key and scope "
             "supersedes the old one; low confidence waits as pending until confirmed.",
             RememberArgs, remember, read_only=False),
    ToolSpec("forget", "Forget memories",
             "Delete memories by id, or archive (or purge) every memory a filter matches. dry_run shows what "
             "a filter would forget.", ForgetArgs, forget, read_only=False, destructive=True),
    ToolSpec("confirm", "Confirm pending memories",
             "Activate pending memories (written with low confidence) once the user confirms them.",
             ConfirmArgs, confirm, read_only=False),
    ToolSpec("history", "Memory history",
             "A memory's supersede chain, oldest first: every version and which one is current.",
             HistoryArgs, history, read_only=True),
    ToolSpec("list", "List memories",
             "Browse the memories a filter matches, a page at a time (pass next_page_token back); no ranking, "
             "unlike recall.",
             ListArgs, list_memories, read_only=True),
)
TOOLS_BY_NAME = {t.name: t for t in TOOLS}
