"""The console's HTTP API through the real server (console on port 0): sessions, same-origin and CSRF
checks, security headers, tenant scoping, and that every route is the engine call gRPC makes, with the
same answers and the same audit."""

from __future__ import annotations

import dataclasses
import errno
import time
from pathlib import Path

import pytest
from console_support import XSS, ConsoleHttp, Seeded, create_key, module_fixtures
from memory_support import audit, get_one, history
from support import ADMIN_KEY, RunningServer, start_server

from server.console.frontend import CSP
from server.domain import Breakdown
from server.engine.ranking import DECAY_FLOOR, RECENCY_WEIGHT
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

running, seeded = module_fixtures()


@pytest.fixture
def alice(running: RunningServer, seeded: Seeded) -> ConsoleHttp:
    console = ConsoleHttp(running.app.console_port)
    assert console.login(seeded.alice_key).status == 200
    return console


@pytest.fixture
def root(running: RunningServer, seeded: Seeded) -> ConsoleHttp:
    console = ConsoleHttp(running.app.console_port)
    assert console.login(ADMIN_KEY).status == 200
    return console


def test_console_is_off_by_default(server) -> None:
    assert server.app.console is None and server.app.console_port == 0
    assert server.app.metrics is None   # and nothing else is built for it


def test_assets_and_api_replies_carry_the_security_headers(running: RunningServer, seeded: Seeded) -> None:
    console = ConsoleHttp(running.app.console_port)
    for path, content_type in (("/", "text/html"), ("/js/app.js", "text/javascript"), ("/console.css", "text/css"),
                               ("/api/session", "application/json"), ("/nope", "text/plain")):
        reply = console.get(path)
        assert reply.headers["content-security-policy"] == CSP, path
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "frame-ancestors 'none'" in CSP
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["x-frame-options"] == "DENY"
        assert reply.headers["referrer-policy"] == "no-referrer"
        assert reply.headers["cross-origin-resource-policy"] == "same-origin"
        assert reply.headers["content-type"].startswith(content_type), path
    assert console.get("/api/session").status == 401
    assert console.get("/nope").status == 404
    assert console.get("/../server/app.py").status == 404
    page = console.get("/").body.decode()
    assert "<script>" not in page.replace('<script type="module" src="/js/app.js"></script>', "")  # no inline script
    etag = console.get("/js/app.js").headers["etag"]
    assert console.request("GET", "/js/app.js", headers={"If-None-Match": etag}).status == 304


def test_login_keeps_the_key_on_the_server_behind_an_httponly_strict_cookie(running: RunningServer,
                                                                             seeded: Seeded) -> None:
    console = ConsoleHttp(running.app.console_port)
    bad = console.login("egk_0123456789abcdef_not-a-real-secret-at-all")
    assert bad.status == 401 and not bad.set_cookie
    reply = console.login(seeded.alice_key)
    assert reply.status == 200
    cookie = reply.set_cookie[0]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert seeded.alice_key not in cookie and seeded.alice_key.encode() not in reply.body
    body = reply.json()
    assert body["principal"]["key_id"] == seeded.alice_key_id and body["principal"]["tenant_ids"] == ["acme/alice"]
    assert console.get("/api/session").json()["csrf"] == console.csrf
    assert console.post("/api/logout", {}).status == 200
    assert console.get("/api/session").status == 401


def test_posts_need_our_origin_json_and_the_csrf_token(alice: ConsoleHttp) -> None:
    query = {"tenant": "acme/alice", "text": "peanuts", "as_of_ms": int(time.time() * 1000)}   # records no access
    assert alice.post("/api/search", query, csrf="").status == 403
    assert alice.post("/api/search", query, csrf="wrong-token").status == 403
    assert alice.post("/api/search", query, origin="http://evil.example").status == 403
    assert alice.post("/api/search", query, origin="").status == 403
    assert alice.post("/api/search", query, content_type="text/plain").status == 400
    cross = alice.request("GET", "/api/tenants", headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status == 403
    assert alice.post("/api/login", {"key": ADMIN_KEY}, origin="http://evil.example").status == 403
    assert alice.post("/api/search", query).status == 200


def test_a_key_for_acme_alice_sees_nothing_of_beta(alice: ConsoleHttp, running: RunningServer) -> None:
    assert [t["tenant_id"] for t in alice.get("/api/tenants").json()["tenants"]] == ["acme/alice"]
    beta = "beta/bob"
    bob_id = running.client().list_all(beta)[0].memory_id
    for reply in (alice.get("/api/tenant", tenant=beta), alice.get("/api/memories", tenant=beta),
                  alice.get("/api/memory", tenant=beta, id=bob_id), alice.get("/api/audit", tenant=beta),
                  alice.post("/api/search", {"tenant": beta, "text": "launch code"}),
                  alice.post("/api/confirm", {"tenant": beta, "ids": [bob_id]}),
                  alice.post("/api/delete", {"tenant": beta, "ids": [bob_id]}),
                  alice.post("/api/forget", {"tenant": beta, "all": True})):
        assert reply.status == 403, reply.body
        assert reply.json()["error"]["code"] == "PERMISSION_DENIED"
        assert b"4242" not in reply.body
    assert [m.content for m in running.client().list_all(beta)] == ["Bob's secret launch code is 4242"]


def test_playground_search_is_the_grpc_search_with_its_breakdown_context_and_audit(alice: ConsoleHttp,
                                                                                  running: RunningServer,
                                                                                  seeded: Seeded) -> None:
    # "As of" searches record no access (nor does any search before this one in this module), so both see the
    # same importances.
    as_of = int(time.time() * 1000)
    text = "does alice have any food allergy?"
    reply = alice.post("/api/search", {"tenant": "acme/alice", "text": text, "top_k": 5, "as_of_ms": as_of})
    assert reply.status == 200
    body = reply.json()
    assert body["breakdown_fields"] == [f.name for f in dataclasses.fields(Breakdown)]
    grpc_result = running.client(seeded.alice_key).search("acme/alice", text, top_k=5, context_block=True,
                                                          scoring=pb.Scoring(now_ms=as_of))
    assert [h["memory"]["memory_id"] for h in body["hits"]] == [h.memory.memory_id for h in grpc_result.hits]
    assert body["hits"][0]["memory"]["content"] == "Alice is allergic to peanuts"
    for hit, wire in zip(body["hits"], grpc_result.hits, strict=True):
        assert set(hit["breakdown"]) == set(body["breakdown_fields"])
        assert hit["breakdown"]["final"] == pytest.approx(wire.breakdown.final, rel=1e-5)
        assert hit["breakdown"]["dense_rank"] == wire.breakdown.dense_rank
        assert hit["breakdown"]["bm25_rank"] == wire.breakdown.bm25_rank
    assert body["context_block"] == grpc_result.context_block and "Alice is allergic to peanuts" in body["context_block"]
    assert body["timings"]["total_ns"] > 0
    searches = [e for e in audit(running.client(), "acme/alice", ops=[5]) if e.query == text]
    assert len(searches) == 2 and {e.key_id for e in searches} == {seeded.alice_key_id}


def test_confirm_delete_and_forget_go_through_the_engine_and_the_audit_log(alice: ConsoleHttp,
                                                                           running: RunningServer,
                                                                           seeded: Seeded) -> None:
    admin = running.client()
    t = "acme/alice"
    pending = admin.write(t, pb.MemoryInput(content="Alice may switch to tea", confidence=0.1)).results[0].memory_id
    reply = alice.post("/api/confirm", {"tenant": t, "ids": [pending]})
    assert reply.status == 200 and reply.json()["results"][0]["memory"]["status"] == "ACTIVE"
    assert get_one(admin, t, pending).status == pb.MEMORY_STATUS_ACTIVE
    confirms = [e for e in audit(admin, t, ops=[6]) if e.refs[0].memory_id == pending]
    assert [e.key_id for e in confirms] == [seeded.alice_key_id]

    preview = alice.post("/api/forget", {"tenant": t, "filter": {"key": "tea-slot"}, "dry_run": True})
    assert preview.status == 200 and preview.json()["count"] == 0
    slot = admin.write(t, pb.MemoryInput(content="Alice's tea is green", key="tea-slot")).results[0].memory_id
    preview = alice.post("/api/forget", {"tenant": t, "filter": {"key": "tea-slot"}, "dry_run": True}).json()
    assert preview == {"count": 1, "memory_ids": [slot], "dry_run": True}
    assert get_one(admin, t, slot).status == pb.MEMORY_STATUS_ACTIVE   # a dry run changes nothing
    assert alice.post("/api/forget", {"tenant": t, "filter": {"key": "tea-slot"}}).json()["count"] == 1
    assert get_one(admin, t, slot).status == pb.MEMORY_STATUS_ARCHIVED

    reply = alice.post("/api/delete", {"tenant": t, "ids": [pending, "m_does_not_exist"]})
    assert reply.json() == {"deleted": 1, "missing": ["m_does_not_exist"]}
    assert list(admin.get(t, pending).missing) == [pending]
    deletes = [e for e in audit(admin, t, ops=[4]) if any(r.memory_id == pending for r in e.refs)]
    assert [e.key_id for e in deletes] == [seeded.alice_key_id]
    assert alice.post("/api/delete", {"tenant": t, "ids": []}).status == 400


def test_memory_page_has_every_field_the_supersede_chain_sources_and_audit(alice: ConsoleHttp, running: RunningServer,
                                                                          seeded: Seeded) -> None:
    reply = alice.get("/api/memory", tenant="acme/alice", id=seeded.old_city_id).json()
    memory = reply["memory"]
    wire = get_one(running.client(), "acme/alice", seeded.old_city_id)
    assert memory["status"] == "SUPERSEDED" and memory["superseded_by"] == seeded.new_city_id
    for name in ("memory_id", "content", "key", "source_ref", "importance", "created_at_ms", "entities", "source_refs"):
        value = getattr(wire, name)
        assert memory[name] == (list(value) if not isinstance(value, (str, int, float)) else pytest.approx(value)), name
    chain = history(running.client(), "acme/alice", seeded.old_city_id)
    assert [v["memory_id"] for v in reply["history"]["versions"]] == [v.memory_id for v in chain.versions]
    assert reply["history"]["latest_id"] == chain.latest_id == seeded.new_city_id
    ops = [e["op"] for e in reply["audit"]]
    assert "WRITE" in ops and "SUPERSEDE" in ops
    assert any("chat-2#5" in r["source_refs"] for e in reply["audit"] for r in e["refs"])
    assert alice.get("/api/memory", tenant="acme/alice", id="m_missing").json() == {"memory": None,
                                                                                    "missing": ["m_missing"]}


def test_memories_filters_and_pages_match_list(alice: ConsoleHttp, running: RunningServer) -> None:
    t = "acme/alice"
    semantic = alice.get("/api/memories", tenant=t, type="SEMANTIC", status="ACTIVE").json()["memories"]
    wire = running.client().list_all(t, types=[pb.MEMORY_TYPE_SEMANTIC], statuses=[pb.MEMORY_STATUS_ACTIVE])
    assert [m["memory_id"] for m in semantic] == [m.memory_id for m in wire]
    alices = alice.get("/api/memories", tenant=t, entity="alice").json()["memories"]
    assert alices and all("alice" in m["entities"] for m in alices)
    first = alice.get("/api/memories", tenant=t, page_size=2).json()
    second = alice.get("/api/memories", tenant=t, page_size=2, page_token=first["next_page_token"]).json()
    assert len(first["memories"]) == 2 and first["next_page_token"]
    assert not {m["memory_id"] for m in first["memories"]} & {m["memory_id"] for m in second["memories"]}
    bad = alice.get("/api/memories", tenant=t, type="NOT_A_TYPE")
    assert bad.status == 400 and "types" in bad.json()["error"]["message"]


def test_tenant_summary_counts_and_timeline(alice: ConsoleHttp, root: ConsoleHttp, running: RunningServer,
                                            seeded: Seeded) -> None:
    s = alice.get("/api/tenant", tenant="acme/alice").json()
    every = running.client().list_all("acme/alice")
    assert s["complete"] and s["total"] == len(every)
    assert s["by_status"]["SUPERSEDED"] == sum(m.status == pb.MEMORY_STATUS_SUPERSEDED for m in every) >= 1
    assert s["by_type"]["PROCEDURAL"] == sum(m.type == pb.MEMORY_TYPE_PROCEDURAL for m in every) >= 1
    assert sum(sum(v) for v in s["timeline"]["series"].values()) == s["total"]
    assert s["last_activity_ms"] >= max(m.created_at_ms for m in every)
    assert s["stats"] is None and "admin" in s["stats_note"]          # Stats is an admin RPC
    admin_view = root.get("/api/tenant", tenant="acme/alice").json()
    assert admin_view["stats"]["dense_tier"] == "flat" and admin_view["stats"]["memories"] == len(every)
    assert {t["tenant_id"] for t in root.get("/api/tenants").json()["tenants"]} >= {"acme/alice", "beta/bob"}


def test_audit_route_filters_by_op_and_memory(alice: ConsoleHttp, seeded: Seeded) -> None:
    writes = alice.get("/api/audit", tenant="acme/alice", op="WRITE").json()["entries"]
    assert writes and {e["op"] for e in writes} == {"WRITE"}
    mine = alice.get("/api/audit", tenant="acme/alice", memory=seeded.new_city_id).json()["entries"]
    assert mine and all(any(seeded.new_city_id in (r["memory_id"], r["related_id"]) for r in e["refs"]) for e in mine)
    page = alice.get("/api/audit", tenant="acme/alice", page_size=1).json()
    assert len(page["entries"]) == 1 and page["next_page_token"]


def test_plots_come_from_the_live_config_and_the_servers_metrics(alice: ConsoleHttp, running: RunningServer,
                                                                 seeded: Seeded) -> None:
    scoring = running.app.config.scoring
    curves = alice.get("/api/plots/recency").json()
    ages = curves["ages_s"]
    assert curves["half_life_s"]["EPISODIC"] == scoring.episodic_half_life_s
    at = min(range(len(ages)), key=lambda i: abs(ages[i] - scoring.episodic_half_life_s))
    decay = DECAY_FLOOR + (1 - DECAY_FLOOR) * 0.5 ** (ages[at] / scoring.episodic_half_life_s)
    weight = RECENCY_WEIGHT   # recency = (1 - w) + w * decay (kernels/decay.py)
    expected = (1 - weight) + weight * decay
    assert curves["curves"]["EPISODIC"][at] == pytest.approx(expected, rel=1e-4)
    assert curves["curves"]["EPISODIC"][0] == pytest.approx(1.0)
    assert set(curves["curves"]["PROCEDURAL"]) == {1.0}   # half-life 0: never decays
    before = len(alice.get("/api/plots/stages").json()["at_ms"])
    client = running.client(seeded.alice_key)
    for text in ("first fresh question", "second fresh question", "third fresh question"):   # no cached embedding
        client.search("acme/alice", text)
    stages = alice.get("/api/plots/stages").json()
    assert len(stages["at_ms"]) == min(100, before + 3)
    assert all(v > 0 for v in stages["series_ms"]["embed"][-3:]) and stages["summary"]["total"]["p95_ms"] > 0


def test_content_comes_back_as_data_and_bad_requests_get_clean_errors(alice: ConsoleHttp, seeded: Seeded) -> None:
    memory = alice.get("/api/memory", tenant="acme/alice", id=seeded.xss_id).json()["memory"]
    assert memory["content"] == XSS   # JSON carries the text; the page renders it as text (browser test)
    assert alice.post("/api/search", {"tenant": "acme/alice", "text": ""}).json()["error"]["code"] == "INVALID_ARGUMENT"
    assert alice.post("/api/search", {"tenant": "acme/alice", "text": "x", "top_k": "many"}).status == 400
    assert alice.request("POST", "/api/search", body=b"{not json", headers={
        "Content-Type": "application/json", "Origin": alice.origin, "X-CSRF-Token": alice.csrf}).status == 400
    assert alice.get("/api/nothing-here").status == 404
    big = alice.request("POST", "/api/search", body=b"x" * (2 << 20), headers={"Content-Type": "application/json"})
    assert big.status == 413
    chunked = alice.request("POST", "/api/search", headers={"Transfer-Encoding": "chunked",
                                                             "Content-Type": "application/json"}, body=b"0\r\n\r\n")
    assert chunked.status == 501


def test_a_revoked_key_ends_its_console_session_at_once(running: RunningServer, seeded: Seeded) -> None:
    admin = running.client()
    key_id, secret = create_key(admin, tenant_ids=["acme/alice"])
    console = ConsoleHttp(running.app.console_port)
    assert console.login(secret).status == 200
    assert console.get("/api/tenants").status == 200
    admin.admin.RevokeKey(spb.RevokeKeyRequest(key_id=key_id), metadata=admin.metadata)
    assert console.get("/api/tenants").status == 401
    assert console.login(secret).status == 401


def test_console_stops_with_the_server(tmp_path: Path, jvm: None, embedder) -> None:
    server = start_server(tmp_path / "data", embedder=embedder, console_listen="127.0.0.1:0")
    port = server.app.console_port
    assert ConsoleHttp(port).get("/").status == 200
    server.stop()
    with pytest.raises(OSError):
        ConsoleHttp(port).get("/")


def test_a_full_disk_is_507_storage_full_not_a_500(alice: ConsoleHttp, running: RunningServer, seeded: Seeded,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    t = "acme/alice"
    space = running.app.engine.space
    assert space is not None
    monkeypatch.setattr(space, "min_free_bytes", 1 << 60)          # below the watermark: writes are refused
    refused = alice.post("/api/confirm", {"tenant": t, "ids": [seeded.pending_id]})
    assert refused.status == 507, refused.body
    assert refused.json()["error"]["code"] == "RESOURCE_EXHAUSTED"
    assert "storage full" in refused.json()["error"]["message"]
    search = {"tenant": t, "text": "peanuts", "as_of_ms": int(time.time() * 1000)}   # records no access
    assert alice.post("/api/search", search).status == 200                         # reads go on
    monkeypatch.setattr(space, "min_free_bytes", 0)

    def enospc(*args: object, **kwargs: object) -> None:   # the disk itself is full (ENOSPC from the log)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(running.app.engine.memories, "delete", enospc)
    full = alice.post("/api/delete", {"tenant": t, "ids": [seeded.pending_id]})
    assert full.status == 507 and "storage full" in full.json()["error"]["message"], full.body
