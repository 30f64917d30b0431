"""``engram mcp`` end to end: the MCP SDK's own client drives the command over stdio and over streamable
HTTP, against the real in-process engram server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import httpx2
import pytest
from mcp_support import call, error, http_client, http_server, ok, stdio_client
from support import ADMIN_KEY, start_server

from engram_client import EngramClient

TOOLS = ["recall", "remember", "forget", "confirm", "history", "list"]
ALICE = [{"content": "Alice is allergic to peanuts", "type": "semantic", "importance": 0.9, "entities": ["alice"],
          "pinned": True},
         {"content": "Alice moved to Lisbon in March and works remotely", "type": "episodic",
          "source_ref": "chat-12#4"},
         {"content": "Alice prefers short answers with bullet points", "type": "semantic"},
         {"content": "Alice's cat is called Miso", "type": "semantic", "entities": ["alice", "miso"]}]
BOB = [{"content": "Bob is training for the Berlin marathon", "type": "semantic"},
       {"content": "Bob's budget for the trip is 2000 euros", "type": "semantic", "key": "budget"}]
TENANT_ARGS = ({"tenant_id": "acme/bob"}, {"tenant": "acme/bob"})


@pytest.fixture(scope="module")
def engram(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder: Any) -> Iterator[dict[str, Any]]:
    # Searches here do not count as uses: a periodic flush between a direct Search and the same search through
    # the integration would otherwise move the access boost between the two (their scores are compared).
    running = start_server(tmp_path_factory.mktemp("mcp") / "data", embedder=embedder,
                           access_top_hits=0)
    with EngramClient(running.address, key=ADMIN_KEY) as admin:
        admin.create_tenant("acme/alice", initial=ALICE)
        admin.create_tenant("acme/bob", initial=BOB)
        yield {"server": running, "address": running.address, "admin": admin,
               "alice": admin.create_key("alice-agent", tenant_ids=["acme/alice"]).secret,
               "bob": admin.create_key("bob-agent", tenant_ids=["acme/bob"]).secret,
               "acme": admin.create_key("acme-ops", prefixes=["acme/"]).secret}
    running.stop()


def ids(data: dict[str, Any], field: str = "hits") -> list[str]:
    return [h["memory_id"] for h in data[field]]


def bob_state(admin: EngramClient) -> list[tuple[str, str, int, int, int]]:
    memories = sorted(admin.iter_memories("acme/bob"), key=lambda m: m.memory_id)
    return [(m.memory_id, m.content, m.status, m.access_count, m.last_access_at_ms) for m in memories]


def test_tools_are_listed_with_precise_schemas(engram: dict[str, Any]) -> None:
    async def main() -> list[Any]:
        async with stdio_client(engram["address"], key=engram["alice"]) as client:
            return list((await client.list_tools()).tools)

    tools = anyio.run(main)
    assert [t.name for t in tools] == TOOLS
    for tool in tools:
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False, tool.name
        assert tool.description and len(tool.description) > 40
        assert not [p for p in schema["properties"] if "tenant" in p]  # no argument can name a tenant
        assert all(p.get("description") for p in schema["properties"].values()), tool.name
    by_name = {t.name: t for t in tools}
    assert by_name["recall"].input_schema["required"] == ["query"]
    assert by_name["remember"].input_schema["required"] == ["content"]
    assert by_name["history"].input_schema["required"] == ["memory_id"]
    assert by_name["confirm"].input_schema["required"] == ["memory_ids"]
    assert by_name["recall"].input_schema["properties"]["top_k"]["maximum"] == 50
    assert [t.name for t in tools if t.annotations.read_only_hint] == ["recall", "history", "list"]
    assert [t.name for t in tools if t.annotations.destructive_hint] == ["forget"]


def test_stdio_recall_remember_round_trip(engram: dict[str, Any]) -> None:
    admin, query = engram["admin"], "Can you suggest a snack for Alice's flight?"
    transcript: list[str] = []

    async def main() -> None:
        async with stdio_client(engram["address"], key=engram["alice"]) as client:  # tenant: the key's scope
            transcript.append("tools: " + ", ".join(t.name for t in (await client.list_tools()).tools))
            recalled = await ok(client, "recall", {"query": query, "top_k": 3})
            direct = admin.search("acme/alice", query, top_k=3)  # the same moment, straight over gRPC
            assert ids(recalled) == [h.memory.memory_id for h in direct.hits]
            assert [h["score"] for h in recalled["hits"]] == [pytest.approx(h.breakdown.final, abs=1e-5)
                                                              for h in direct.hits]
            assert recalled["context"] == admin.recall("acme/alice", query, top_k=3).context
            assert "Alice" in recalled["context"]
            top = recalled["hits"][0]
            assert {"dense_rank", "bm25_rank", "rrf", "decay", "importance_weight", "final"} <= set(top["breakdown"])
            assert top["age_s"] >= 0 and top["created_at"].endswith("Z")
            transcript.append(f"recall {json.dumps({'query': query, 'top_k': 3})}\n"
                              + json.dumps({"context": recalled["context"], "hits": [
                                  {k: h[k] for k in ("memory_id", "content", "score", "age_s")}
                                  for h in recalled["hits"]]}, indent=1, ensure_ascii=False))

            used = [h["memory_id"] for h in recalled["hits"] if "peanut" in h["content"]]
            before = {m.memory_id: m.access_count for m in admin.get("acme/alice", used).memories}
            note = {"content": "Alice asked for flight snack ideas; suggested peanut-free trail mix",
                    "type": "episodic", "entities": ["alice"], "source_ref": "chat-13#1", "used_memory_ids": used}
            written = await ok(client, "remember", note)
            assert written["outcome"] == "created" and written["status"] == "active"
            assert written["marked_used"] == used and written["missing"] == []
            transcript.append(f"remember {json.dumps(note, ensure_ascii=False)}\n{json.dumps(written)}")

            stored = admin.get("acme/alice", [written["memory_id"]]).memories[0]
            assert stored.source_ref == "chat-13#1" and list(stored.entities) == ["alice"]
            after = {m.memory_id: m.access_count for m in admin.get("acme/alice", used).memories}
            assert after == {i: n + 1 for i, n in before.items()}  # the loop's "touch what was used"
            uses = list(admin.iter_audit("acme/alice", ops=["use"]))
            assert used[0] in [r.memory_id for e in uses for r in e.refs]
            again = await ok(client, "recall", {"query": "what did Alice ask about her flight?", "top_k": 3})
            assert written["memory_id"] in ids(again)

    anyio.run(main)
    print("\n\n".join(transcript))  # the README's round trip (pytest -s shows it)


def test_stdio_lifecycle_tools(engram: dict[str, Any]) -> None:
    async def main() -> None:
        async with stdio_client(engram["address"], key=engram["alice"], tenant="acme/alice") as client:
            first = await ok(client, "remember", {"content": "Alice eats vegetarian food", "key": "diet"})
            second = await ok(client, "remember", {"content": "Alice eats vegan food since May", "key": "diet"})
            assert second["superseded"] == [first["memory_id"]]
            chain = await ok(client, "history", {"memory_id": first["memory_id"]})
            assert chain["latest_id"] == second["memory_id"]
            assert [(v["memory_id"], v["status"]) for v in chain["versions"]] == [
                (first["memory_id"], "superseded"), (second["memory_id"], "active")]

            unsure = await ok(client, "remember", {"content": "Alice may be moving to Porto", "confidence": 0.2})
            assert unsure["outcome"] == "pending"
            recalled = await ok(client, "recall", {"query": "is alice moving to Porto?"})
            assert unsure["memory_id"] not in ids(recalled)
            pending = await ok(client, "list", {"statuses": ["pending"]})
            assert ids(pending, "memories") == [unsure["memory_id"]]
            confirmed = await ok(client, "confirm", {"memory_ids": [unsure["memory_id"]]})
            assert [(c["memory_id"], c["status"]) for c in confirmed["confirmed"]] == [(unsure["memory_id"], "active")]
            assert unsure["memory_id"] in ids(await ok(client, "recall", {"query": "is alice moving to Porto?"}))

            page = await ok(client, "list", {"types": ["episodic"], "page_size": 1})
            assert len(page["memories"]) == 1 and page["next_page_token"]
            rest = await ok(client, "list", {"types": ["episodic"], "page_size": 100,
                                             "page_token": page["next_page_token"]})
            assert all(m["type"] == "episodic" for m in page["memories"] + rest["memories"])

            dry = await ok(client, "forget", {"entities_any": ["miso"], "dry_run": True})
            assert dry["count"] == 1 and dry["mode"] == "archive"
            archived = await ok(client, "forget", {"entities_any": ["miso"]})
            assert archived["memory_ids"] == dry["memory_ids"]
            assert dry["memory_ids"][0] not in ids(await ok(client, "recall", {"query": "what is the cat called?"}))
            deleted = await ok(client, "forget", {"memory_ids": [second["memory_id"], "m_nope"]})
            assert deleted == {"mode": "delete", "count": 1, "missing": ["m_nope"]}
            assert "either memory_ids or a filter" in await error(client, "forget", {})

    anyio.run(main)


def test_stdio_key_cannot_reach_another_tenant(engram: dict[str, Any]) -> None:
    admin = engram["admin"]
    bob_ids = [m.memory_id for m in admin.iter_memories("acme/bob")]
    before = bob_state(admin)

    async def main() -> None:
        async with stdio_client(engram["address"], key=engram["alice"]) as client:
            calls: list[tuple[str, dict[str, Any]]] = [
                ("recall", {"query": "marathon"}), ("remember", {"content": "x"}), ("forget", {"memory_ids": bob_ids}),
                ("confirm", {"memory_ids": bob_ids}), ("history", {"memory_id": bob_ids[0]}), ("list", {})]
            for tool, arguments in calls:
                for extra in TENANT_ARGS:  # refused before anything runs
                    text = await error(client, tool, {**arguments, **extra})
                    assert text.startswith("INVALID_ARGUMENT") and "Extra inputs are not permitted" in text
            # bob's ids are unknown in alice's tenant, whatever tool gets them
            assert (await error(client, "history", {"memory_id": bob_ids[0]})).startswith("NOT_FOUND")
            assert (await error(client, "confirm", {"memory_ids": bob_ids[:1]})).startswith("NOT_FOUND")
            assert (await ok(client, "forget", {"memory_ids": bob_ids}))["missing"] == bob_ids
            marked = await ok(client, "remember", {"content": "Alice runs on Sundays", "used_memory_ids": bob_ids})
            assert marked["marked_used"] == [] and marked["missing"] == bob_ids
            recalled = await ok(client, "recall", {"query": "Bob marathon budget euros", "top_k": 50})
            listed = await ok(client, "list", {"page_size": 100})
            seen = set(ids(recalled)) | set(ids(listed, "memories"))
            assert seen and not seen & set(bob_ids)
            assert not [h for h in recalled["hits"] if "Bob" in h["content"]]

    anyio.run(main)
    assert bob_state(admin) == before  # nothing of bob's was read-marked, archived, deleted or confirmed


def test_stdio_bad_arguments_are_tool_errors(engram: dict[str, Any]) -> None:
    async def main() -> None:
        async with stdio_client(engram["address"], key=engram["alice"]) as client:
            assert "top_k" in await error(client, "recall", {"query": "x", "top_k": 0})
            assert "query" in await error(client, "recall", {})
            assert "importance" in await error(client, "remember", {"content": "x", "importance": 2})
            assert "type" in await error(client, "remember", {"content": "x", "type": "dream"})
            assert "unknown tool" in await error(client, "search_everything", {})
            # the server's own status text, as a gRPC client would read it
            huge = await error(client, "remember", {"content": "word " * 5000})
            assert huge.startswith("INVALID_ARGUMENT: ") and "larger than 16384 bytes" in huge
            assert (await error(client, "history", {"memory_id": "m_missing"})).startswith("NOT_FOUND: ")
            assert (await error(client, "remember", {"content": "x", "supersedes": ["m_missing"]})).startswith(
                "INVALID_ARGUMENT: ")
            assert (await ok(client, "recall", {"query": "peanuts"}))["hits"]  # the same session still serves
        async with stdio_client(engram["address"], key="egk_0000000000000000_wrong") as client:
            assert (await error(client, "recall", {"query": "peanuts"})).startswith("UNAUTHENTICATED: ")
        async with stdio_client(engram["address"], key=engram["acme"]) as client:  # covers two tenants
            assert "start `engram mcp` with --tenant" in await error(client, "list", {})

    anyio.run(main)
    assert engram["admin"].info().embedder.dim == 384  # and so does engram


@pytest.fixture(scope="module")
def http_url(engram: dict[str, Any]) -> Iterator[str]:
    with http_server(engram["address"]) as url:
        yield url


def test_http_each_request_brings_its_key(engram: dict[str, Any], http_url: str) -> None:
    admin = engram["admin"]

    async def main() -> None:
        async with http_client(http_url, key=engram["alice"]) as alice, \
                http_client(http_url, key=engram["bob"]) as bob:
            assert [t.name for t in (await alice.list_tools()).tools] == TOOLS
            for client, tenant, query in ((alice, "acme/alice", "peanut allergy"), (bob, "acme/bob", "marathon")):
                recalled = await ok(client, "recall", {"query": query, "top_k": 2})
                assert ids(recalled) == [h.memory.memory_id for h in admin.search(tenant, query, top_k=2).hits]
            written = await ok(bob, "remember", {"content": "Bob switched to a vegetarian diet", "key": "diet",
                                                 "source_ref": "chat-3#1"})
            assert admin.get("acme/bob", [written["memory_id"]]).memories[0].source_ref == "chat-3#1"
            assert written["memory_id"] not in ids(await ok(alice, "list", {"page_size": 100}), "memories")
            assert (await error(alice, "history", {"memory_id": written["memory_id"]})).startswith("NOT_FOUND")
            chain = await ok(bob, "history", {"memory_id": written["memory_id"]})
            assert chain["latest_id"] == written["memory_id"]
            assert (await ok(bob, "confirm", {"memory_ids": [written["memory_id"]]}))["confirmed"]
            assert (await ok(bob, "forget", {"key": "diet", "dry_run": True}))["memory_ids"] == [written["memory_id"]]
            text = await error(bob, "recall", {"query": "x", "tenant_id": "acme/alice"})
            assert "Extra inputs are not permitted" in text
            assert "larger than 16384 bytes" in await error(bob, "remember", {"content": "word " * 5000})

    anyio.run(main)


def test_http_refuses_requests_without_a_valid_key(engram: dict[str, Any], http_url: str) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for auth in ({}, {"Authorization": "Basic YTpi"}, {"Authorization": "Bearer egk_0000000000000000_wrong"},
                 {"Authorization": "Bearer not-a-key"}):
        reply = httpx2.post(http_url, json=initialize, headers={**headers, **auth}, timeout=30)
        assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer"), auth
    assert httpx2.post(http_url, json=initialize, headers={**headers, "Authorization": f"Bearer {engram['alice']}"},
                       timeout=30).status_code == 200

    async def refused() -> None:
        async with http_client(http_url, key="egk_0000000000000000_wrong") as client:
            await client.list_tools()

    with pytest.raises(BaseException, match="unhandled errors"):  # the SDK client cannot even connect
        anyio.run(refused)

    async def still_serving() -> None:
        async with http_client(http_url, key=engram["alice"]) as client:
            assert (await ok(client, "recall", {"query": "peanuts"}))["hits"]

    anyio.run(still_serving)


def test_http_with_a_configured_tenant(engram: dict[str, Any]) -> None:
    with http_server(engram["address"], tenant="acme/alice") as url:
        async def main() -> None:
            async with http_client(url, key=engram["acme"]) as ops:  # a prefix key: the flag picks the tenant
                top = (await ok(ops, "recall", {"query": "peanut allergy"}))["hits"][0]
                assert top["content"] == ALICE[0]["content"]
            async with http_client(url, key=engram["bob"]) as bob:  # engram refuses bob's key for acme/alice
                assert (await error(bob, "recall", {"query": "peanuts"})).startswith("PERMISSION_DENIED: ")

        anyio.run(main)


def test_mcp_command_needs_no_server_modules() -> None:
    """engram mcp imports only the SDK's dependencies and the MCP SDK: no torch, FAISS, JVM or server."""
    import subprocess
    import sys

    code = ("import sys, engram_integrations.mcp, engram_cli; engram_cli.build_parser().parse_args(['mcp']); "
            "print(','.join(m for m in ('torch', 'faiss', 'jnius', 'numpy', 'transformers', 'server', "
            "'server.engine', 'server.app', 'langchain_core', 'llama_index') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == ""


def test_grpc_status_of_tool_errors_matches_direct_call(engram: dict[str, Any]) -> None:
    with EngramClient(engram["address"], key=engram["alice"]) as alice:
        with pytest.raises(grpc.RpcError) as direct:
            alice.history("acme/alice", "m_missing")

    async def main() -> str:
        async with stdio_client(engram["address"], key=engram["alice"]) as client:
            return await error(client, "history", {"memory_id": "m_missing"})

    assert anyio.run(main) == f"{direct.value.code().name}: {direct.value.details()}"
