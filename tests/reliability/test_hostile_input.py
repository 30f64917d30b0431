"""Hostile input, RPC by RPC: each row is one bad request and the status it must get. After every row the
server's stored state (every tenant, every memory) is unchanged and the server still serves.

Adding an RPC: append its rows to ``ROWS`` (the generic rows — missing, malformed or wrong credentials,
undecodable bytes — already cover every RPC of the services via ``all_rpcs()``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from reliability.hostile import LIMITS, admin_metadata, all_rpcs, assert_serving, call, snapshot
from support import RunningServer

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

C = grpc.StatusCode
INVALID, NOT_FOUND, DENIED, UNAUTH = C.INVALID_ARGUMENT, C.NOT_FOUND, C.PERMISSION_DENIED, C.UNAUTHENTICATED
NAN, INF = math.nan, math.inf


@dataclass(frozen=True)
class Row:
    rpc: str                   # "Service/Method"
    name: str
    request: Any               # a message, or raw bytes
    code: grpc.StatusCode
    auth: str = "admin"        # admin | tenant (a key for "acme" only) | none | or literal metadata value
    timeout: float | None = 30.0
    id: str = field(default="", compare=False)


def utf8_bad(field_number: int, inner: bytes = b"") -> bytes:
    """A length-delimited field holding invalid UTF-8 (``inner`` wraps it one message deeper)."""
    payload = inner or b"ac\xffme"
    return bytes([(field_number << 3) | 2, len(payload)]) + payload


W, S, G, D, L, I = ("MemoryService/" + n for n in ("Write", "Search", "Get", "Delete", "List", "Info"))
CT, LT, CK, RK, RO = ("AdminService/" + n for n in ("CreateTenant", "ListTenants", "CreateKey", "RevokeKey",
                                                    "RotateKey"))
mi, q, flt = pb.MemoryInput, pb.SearchQuery, pb.Filter


def write(*memories: pb.MemoryInput, tenant: str = "acme") -> spb.WriteRequest:
    return spb.WriteRequest(tenant_id=tenant, memories=list(memories))


def search(*queries: pb.SearchQuery, tenant: str = "acme") -> spb.SearchRequest:
    return spb.SearchRequest(tenant_id=tenant, queries=list(queries))


big = "x" * (LIMITS["max_content_bytes"] + 1)
ROWS: list[Row] = [
    # -- Write -------------------------------------------------------------------------------------------
    Row(W, "empty request", spb.WriteRequest(), INVALID),
    Row(W, "no memories", write(), INVALID),
    Row(W, "empty content", write(mi(content="")), INVALID),
    Row(W, "whitespace content", write(mi(content=" \n\t ")), INVALID),
    Row(W, "oversize content", write(mi(content=big)), INVALID),
    Row(W, "oversize multibyte content", write(mi(content="記" * 400)), INVALID),
    Row(W, "oversize context", write(mi(content="a", context=big)), INVALID),
    # A stray NUL is dropped on write (README "Memory hygiene"); a context of mostly control characters is not text
    Row(W, "binary context", write(mi(content="a", context="\x00\x01\x02\x03tu")), INVALID),
    Row(W, "too many memories", write(*[mi(content=f"m{i}") for i in range(LIMITS["max_memories_per_write"] + 1)]),
        INVALID),
    Row(W, "one bad memory among good ones", write(mi(content="fine"), mi(content="also fine", importance=NAN)),
        INVALID),
    Row(W, "NaN importance", write(mi(content="a", importance=NAN)), INVALID),
    Row(W, "inf confidence", write(mi(content="a", confidence=INF)), INVALID),
    Row(W, "negative importance", write(mi(content="a", importance=-0.1)), INVALID),
    Row(W, "importance above one", write(mi(content="a", importance=1.5)), INVALID),
    Row(W, "unknown memory type", write(mi(content="a", type=99)), INVALID),
    Row(W, "negative created_at", write(mi(content="a", created_at_ms=-1)), INVALID),
    Row(W, "created_at past year 3000", write(mi(content="a", created_at_ms=2**62)), INVALID),
    Row(W, "NUL in content", write(mi(content="a\x00b")), INVALID),
    Row(W, "control char in key", write(mi(content="a", key="bud\x07get")), INVALID),
    Row(W, "control char in entity", write(mi(content="a", entities=["x\x1b[31m"])), INVALID),
    Row(W, "empty entity", write(mi(content="a", entities=[""])), INVALID),
    Row(W, "too many entities", write(mi(content="a", entities=[f"e{i}" for i in range(5)])), INVALID),
    Row(W, "too many metadata entries", write(mi(content="a", metadata={f"k{i}": "v" for i in range(5)})), INVALID),
    Row(W, "control char in metadata value", write(mi(content="a", metadata={"k": "v\x00"})), INVALID),
    Row(W, "supersedes an unknown memory", write(mi(content="a", supersedes=["m_nope"])), INVALID),
    Row(W, "supersedes with control chars", write(mi(content="a", supersedes=["m_\x00"])), INVALID),
    Row(W, "unknown tenant", write(mi(content="a"), tenant="nobody"), NOT_FOUND),
    Row(W, "look-alike tenant with another key", write(mi(content="a"), tenant="acme2"), DENIED, auth="tenant"),
    Row(W, "sub-tenant with an exact key", write(mi(content="a"), tenant="acme/alice"), DENIED, auth="tenant"),
    Row(W, "tenant with NUL", write(mi(content="a"), tenant="acme\x00"), INVALID),
    Row(W, "tenant with newline", write(mi(content="a"), tenant="acme\n"), INVALID),
    Row(W, "tenant path traversal", write(mi(content="a"), tenant="acme/../acme2"), INVALID),
    Row(W, "tenant fullwidth look-alike", write(mi(content="a"), tenant="ａcme"), INVALID),
    Row(W, "tenant Cyrillic look-alike", write(mi(content="a"), tenant="аcme"), INVALID),
    Row(W, "tenant trailing slash", write(mi(content="a"), tenant="acme/"), INVALID),
    Row(W, "tenant too long", write(mi(content="a"), tenant="a" * 129), INVALID),
    Row(W, "invalid UTF-8 tenant id", utf8_bad(1), INVALID),
    Row(W, "invalid UTF-8 content", utf8_bad(2, utf8_bad(1)), INVALID),
    Row(W, "expired deadline", write(mi(content="deadline passed")), C.DEADLINE_EXCEEDED, timeout=1e-4),
    # -- Search ------------------------------------------------------------------------------------------
    Row(S, "empty request", spb.SearchRequest(), INVALID),
    Row(S, "no queries", search(), INVALID),
    Row(S, "empty query text", search(q(text="")), INVALID),
    Row(S, "oversize query", search(q(text="y" * (LIMITS["max_query_bytes"] + 1))), INVALID),
    Row(S, "too many queries", search(*[q(text="tea")] * (LIMITS["max_queries_per_search"] + 1)), INVALID),
    Row(S, "negative top_k", search(q(text="tea", top_k=-1)), INVALID),
    Row(S, "huge top_k", search(q(text="tea", top_k=2**31 - 1)), INVALID),
    Row(S, "negative candidates", search(q(text="tea", candidates=-5)), INVALID),
    Row(S, "huge candidates", search(q(text="tea", candidates=10**9)), INVALID),
    Row(S, "rerank_depth below -1", search(q(text="tea", rerank_depth=-2)), INVALID),
    Row(S, "lexical_only and dense_only", search(q(text="tea", lexical_only=True, dense_only=True)), INVALID),
    Row(S, "NaN half-life", search(q(text="tea", scoring=pb.Scoring(semantic_half_life_s=NAN))), INVALID),
    Row(S, "negative half-life", search(q(text="tea", scoring=pb.Scoring(episodic_half_life_s=-1))), INVALID),
    Row(S, "inf importance weight", search(q(text="tea", scoring=pb.Scoring(importance_weight=INF))), INVALID),
    Row(S, "negative now_ms", search(q(text="tea", scoring=pb.Scoring(now_ms=-5))), INVALID),
    Row(S, "unknown type in filter", search(q(text="tea", filter=flt(types=[42]))), INVALID),
    Row(S, "UNSPECIFIED type in filter", search(q(text="tea", filter=flt(types=[0]))), INVALID),
    Row(S, "unknown status in filter", search(q(text="tea", filter=flt(statuses=[77]))), INVALID),
    Row(S, "NaN min_importance", search(q(text="tea", filter=flt(min_importance=NAN))), INVALID),
    Row(S, "negative created_after", search(q(text="tea", filter=flt(created_after_ms=-1))), INVALID),
    Row(S, "control char in filter scope", search(q(text="tea", filter=flt(scope="a\x00"))), INVALID),
    Row(S, "empty entity in filter", search(q(text="tea", filter=flt(entities_any=[""]))), INVALID),
    Row(S, "only NULs in query", search(q(text="\x00\x00")), INVALID),   # nothing left once normalised
    Row("MemoryService/Consolidate", "unknown tenant", spb.ConsolidateRequest(tenant_id="nobody"), NOT_FOUND),
    Row("MemoryService/Extract", "no extractor configured", spb.ExtractRequest(tenant_id="acme"),
        C.FAILED_PRECONDITION),
    *[Row("MemoryService/UpdateSettings", name, spb.UpdateSettingsRequest(
        tenant_id="acme", settings=spb.TenantSettings(**values), reset=reset), INVALID, auth="tenant")
      for name, values, reset in (("nothing to update", {}, []), ("negative min_salience", {"min_salience": -0.5}, []),
                                  ("min_salience above 1", {"min_salience": 2.0}, []),
                                  ("NaN min_salience", {"min_salience": NAN}, []),
                                  ("unknown setting reset", {}, ["min_salience", "max_salience"]),
                                  ("set and reset together", {"min_salience": 0.1}, ["min_salience"]))],
    Row("MemoryService/UpdateSettings", "look-alike tenant", spb.UpdateSettingsRequest(
        tenant_id="acme2", settings=spb.TenantSettings(min_salience=0.1)), DENIED, auth="tenant"),
    Row("MemoryService/UpdateSettings", "unknown tenant", spb.UpdateSettingsRequest(
        tenant_id="ghost", settings=spb.TenantSettings(min_salience=0.1)), NOT_FOUND),
    Row("MemoryService/GetSettings", "unknown tenant", spb.GetSettingsRequest(tenant_id="ghost"), NOT_FOUND),
    Row("MemoryService/GetSettings", "look-alike tenant", spb.GetSettingsRequest(tenant_id="acme2"), DENIED,
        auth="tenant"),
    Row(S, "look-alike tenant", search(q(text="tea"), tenant="acme2"), DENIED, auth="tenant"),
    Row(S, "unknown tenant", search(q(text="tea"), tenant="ghost"), NOT_FOUND),
    Row(S, "invalid UTF-8 query", utf8_bad(2, utf8_bad(1)), INVALID),
    Row(S, "expired deadline", search(q(text="tea")), C.DEADLINE_EXCEEDED, timeout=1e-4),
    # -- Get / Delete ------------------------------------------------------------------------------------
    *[row for rpc, cls in ((G, spb.GetRequest), (D, spb.DeleteRequest)) for row in (
        Row(rpc, "empty request", cls(), INVALID),
        Row(rpc, "no ids", cls(tenant_id="acme"), INVALID),
        Row(rpc, "empty id", cls(tenant_id="acme", memory_ids=[""]), INVALID),
        Row(rpc, "NUL in id", cls(tenant_id="acme", memory_ids=["m_\x00"]), INVALID),
        Row(rpc, "too many ids", cls(tenant_id="acme", memory_ids=[f"m_{i}" for i in range(21)]), INVALID),
        Row(rpc, "oversize id", cls(tenant_id="acme", memory_ids=["m" * 300]), INVALID),
        Row(rpc, "look-alike tenant", cls(tenant_id="acme2", memory_ids=["m_x"]), DENIED, auth="tenant"),
        Row(rpc, "case look-alike tenant", cls(tenant_id="ACME", memory_ids=["m_x"]), DENIED, auth="tenant"),
        Row(rpc, "unknown tenant", cls(tenant_id="ghost", memory_ids=["m_x"]), NOT_FOUND),
        Row(rpc, "invalid UTF-8 id", utf8_bad(1, b"acme") + utf8_bad(2), INVALID),
    )],
    # -- List --------------------------------------------------------------------------------------------
    Row(L, "empty request", spb.ListRequest(), INVALID),
    Row(L, "negative page size", spb.ListRequest(tenant_id="acme", page_size=-1), INVALID),
    Row(L, "huge page size", spb.ListRequest(tenant_id="acme", page_size=2**31 - 1), INVALID),
    Row(L, "forged page token", spb.ListRequest(tenant_id="acme", page_token="!!not-base64"), INVALID),
    Row(L, "page token of another shape", spb.ListRequest(tenant_id="acme", page_token="eDEyMw=="), INVALID),
    Row(L, "unknown status filter", spb.ListRequest(tenant_id="acme", filter=flt(statuses=[9])), INVALID),
    Row(L, "unknown type filter", spb.ListRequest(tenant_id="acme", filter=flt(types=[-3])), INVALID),
    Row(L, "negative time filter", spb.ListRequest(tenant_id="acme", filter=flt(accessed_before_ms=-9)), INVALID),
    Row(L, "look-alike tenant", spb.ListRequest(tenant_id="acme2"), DENIED, auth="tenant"),
    Row(L, "invalid UTF-8 tenant", utf8_bad(1), INVALID),
    # -- Info --------------------------------------------------------------------------------------------
    Row(I, "no credential", spb.InfoRequest(), UNAUTH, auth="none"),
    # -- CreateTenant ------------------------------------------------------------------------------------
    Row(CT, "empty tenant id", spb.CreateTenantRequest(), INVALID),
    Row(CT, "existing tenant", spb.CreateTenantRequest(tenant_id="acme"), C.ALREADY_EXISTS),
    Row(CT, "tenant key is not admin", spb.CreateTenantRequest(tenant_id="acme/bob"), DENIED, auth="tenant"),
    *[Row(CT, f"bad tenant id {bad!r}", spb.CreateTenantRequest(tenant_id=bad), INVALID)
      for bad in ("/acme", "acme/", "a//b", ".hidden", "a/../b", "acme b", "ａcme", "аcme", "acme\x00", "acme\n",
                  "ACMÉ", "a" * 129, "acme\u200b")],
    Row(CT, "bad initial memory: nothing created", spb.CreateTenantRequest(
        tenant_id="fresh", initial_memories=[mi(content="ok"), mi(content="", importance=NAN)]), INVALID),
    Row(CT, "too many initial memories", spb.CreateTenantRequest(
        tenant_id="fresh", initial_memories=[mi(content=f"m{i}") for i in range(9)]), INVALID),
    Row(CT, "invalid UTF-8 tenant id", utf8_bad(1), INVALID),
    # -- ListTenants -------------------------------------------------------------------------------------
    Row(LT, "wrong scheme", spb.ListTenantsRequest(), UNAUTH, auth="Basic dXNlcjpwYXNz"),
    # -- CreateKey ---------------------------------------------------------------------------------------
    Row(CK, "no scope", spb.CreateKeyRequest(name="k"), INVALID),
    Row(CK, "prefix without slash", spb.CreateKeyRequest(name="k", tenant_prefixes=["acme"]), INVALID),
    Row(CK, "prefix traversal", spb.CreateKeyRequest(name="k", tenant_prefixes=["../"]), INVALID),
    Row(CK, "prefix with NUL", spb.CreateKeyRequest(name="k", tenant_prefixes=["acme\x00/"]), INVALID),
    Row(CK, "bad tenant id", spb.CreateKeyRequest(name="k", tenant_ids=["ａcme"]), INVALID),
    Row(CK, "oversize name", spb.CreateKeyRequest(name="n" * 129, admin=True), INVALID),
    Row(CK, "tenant key is not admin", spb.CreateKeyRequest(name="k", admin=True), DENIED, auth="tenant"),
    Row(CK, "invalid UTF-8 name", utf8_bad(1), INVALID),
    # -- RevokeKey / RotateKey ---------------------------------------------------------------------------
    *[row for rpc, cls in ((RK, spb.RevokeKeyRequest), (RO, spb.RotateKeyRequest)) for row in (
        Row(rpc, "empty key id", cls(), INVALID),
        Row(rpc, "non-hex key id", cls(key_id="zzzzzzzzzzzzzzzz"), INVALID),
        Row(rpc, "bootstrap admin key", cls(key_id="0" * 16), INVALID),
        Row(rpc, "unknown key id", cls(key_id="0123456789abcdef"), NOT_FOUND),
        Row(rpc, "tenant key is not admin", cls(key_id="0123456789abcdef"), DENIED, auth="tenant"),
        Row(rpc, "invalid UTF-8 key id", utf8_bad(1), INVALID),
    )],
]

H, CF, FG, AU, TO, LU = ("MemoryService/" + n for n in ("History", "Confirm", "Forget", "Audit", "Touch", "LinkUpdate"))
ST, DT = "AdminService/Stats", "AdminService/DeleteTenant"
ROWS += [
    # -- History -----------------------------------------------------------------------------------------
    Row(H, "empty request", spb.HistoryRequest(), INVALID),
    Row(H, "no memory id", spb.HistoryRequest(tenant_id="acme"), INVALID),
    Row(H, "NUL in memory id", spb.HistoryRequest(tenant_id="acme", memory_id="m_\x00"), INVALID),
    Row(H, "oversize memory id", spb.HistoryRequest(tenant_id="acme", memory_id="m" * 300), INVALID),
    Row(H, "unknown memory", spb.HistoryRequest(tenant_id="acme", memory_id="m_nope"), NOT_FOUND),
    Row(H, "look-alike tenant", spb.HistoryRequest(tenant_id="acme2", memory_id="m_x"), DENIED, auth="tenant"),
    Row(H, "invalid UTF-8 id", utf8_bad(1, b"acme") + utf8_bad(2), INVALID),
    # -- LinkUpdate --------------------------------------------------------------------------------------
    Row(LU, "empty request", spb.LinkUpdateRequest(), INVALID),
    Row(LU, "no updates id", spb.LinkUpdateRequest(tenant_id="acme", memory_id="m_a"), INVALID),
    Row(LU, "NUL in id", spb.LinkUpdateRequest(tenant_id="acme", memory_id="m_\x00", updates_id="m_b"), INVALID),
    Row(LU, "oversize id", spb.LinkUpdateRequest(tenant_id="acme", memory_id="m" * 300, updates_id="m_b"), INVALID),
    Row(LU, "a memory updates itself", spb.LinkUpdateRequest(tenant_id="acme", memory_id="m_a", updates_id="m_a"),
        INVALID),
    Row(LU, "unknown ids", spb.LinkUpdateRequest(tenant_id="acme", memory_id="m_nope", updates_id="m_nope2"),
        NOT_FOUND),
    Row(LU, "look-alike tenant", spb.LinkUpdateRequest(tenant_id="acme2", memory_id="m_a", updates_id="m_b"), DENIED,
        auth="tenant"),
    # -- Confirm -----------------------------------------------------------------------------------------
    Row(CF, "empty request", spb.ConfirmRequest(), INVALID),
    Row(CF, "no ids", spb.ConfirmRequest(tenant_id="acme"), INVALID),
    Row(CF, "NUL in id", spb.ConfirmRequest(tenant_id="acme", memory_ids=["m_\x00"]), INVALID),
    Row(CF, "too many ids", spb.ConfirmRequest(tenant_id="acme", memory_ids=[f"m_{i}" for i in range(21)]), INVALID),
    Row(CF, "unknown id", spb.ConfirmRequest(tenant_id="acme", memory_ids=["m_nope"]), NOT_FOUND),
    Row(CF, "look-alike tenant", spb.ConfirmRequest(tenant_id="acme2", memory_ids=["m_x"]), DENIED, auth="tenant"),
    Row(CF, "invalid UTF-8 id", utf8_bad(1, b"acme") + utf8_bad(2), INVALID),
    # -- Touch (unknown ids are answered as missing, OK, and change nothing) -------------------------------
    Row(TO, "empty request", spb.TouchRequest(), INVALID),
    Row(TO, "no ids", spb.TouchRequest(tenant_id="acme"), INVALID),
    Row(TO, "NUL in id", spb.TouchRequest(tenant_id="acme", memory_ids=["m_\x00"]), INVALID),
    Row(TO, "too many ids", spb.TouchRequest(tenant_id="acme", memory_ids=[f"m_{i}" for i in range(21)]), INVALID),
    Row(TO, "unknown id", spb.TouchRequest(tenant_id="acme", memory_ids=["m_nope"]), C.OK),
    Row(TO, "look-alike tenant", spb.TouchRequest(tenant_id="acme2", memory_ids=["m_x"]), DENIED, auth="tenant"),
    Row(TO, "invalid UTF-8 id", utf8_bad(1, b"acme") + utf8_bad(2), INVALID),
    # -- Forget ------------------------------------------------------------------------------------------
    Row(FG, "empty request", spb.ForgetRequest(), INVALID),
    Row(FG, "everything without all=true", spb.ForgetRequest(tenant_id="acme", mode=spb.FORGET_MODE_DELETE), INVALID),
    Row(FG, "unknown mode", spb.ForgetRequest(tenant_id="acme", all=True, mode=7), INVALID),
    Row(FG, "unknown status filter", spb.ForgetRequest(tenant_id="acme", filter=flt(statuses=[66])), INVALID),
    Row(FG, "NaN min_importance", spb.ForgetRequest(tenant_id="acme", filter=flt(min_importance=NAN)), INVALID),
    Row(FG, "negative older_than", spb.ForgetRequest(tenant_id="acme", older_than_ms=-1), INVALID),
    Row(FG, "look-alike tenant", spb.ForgetRequest(tenant_id="acme2", all=True), DENIED, auth="tenant"),
    Row(FG, "sub-tenant with an exact key", spb.ForgetRequest(tenant_id="acme/alice", all=True), DENIED,
        auth="tenant"),
    Row(FG, "invalid UTF-8 tenant", utf8_bad(1), INVALID),
    # -- Audit -------------------------------------------------------------------------------------------
    Row(AU, "empty request", spb.AuditRequest(), INVALID),
    Row(AU, "negative page size", spb.AuditRequest(tenant_id="acme", page_size=-1), INVALID),
    Row(AU, "huge page size", spb.AuditRequest(tenant_id="acme", page_size=2**31 - 1), INVALID),
    Row(AU, "forged page token", spb.AuditRequest(tenant_id="acme", page_token="!!"), INVALID),
    Row(AU, "unknown op", spb.AuditRequest(tenant_id="acme", ops=[99]), INVALID),
    Row(AU, "NUL in memory id", spb.AuditRequest(tenant_id="acme", memory_id="m_\x00"), INVALID),
    Row(AU, "look-alike tenant", spb.AuditRequest(tenant_id="acme2"), DENIED, auth="tenant"),
    Row(AU, "invalid UTF-8 tenant", utf8_bad(1), INVALID),
    # -- Stats -------------------------------------------------------------------------------------------
    Row(ST, "bad tenant id", spb.StatsRequest(tenant_id="acme\x00"), INVALID),
    Row(ST, "look-alike tenant", spb.StatsRequest(tenant_id="acme2"), DENIED, auth="tenant"),
    Row(ST, "invalid UTF-8 tenant", utf8_bad(1), INVALID),
    # -- DeleteTenant ------------------------------------------------------------------------------------
    Row(DT, "empty tenant id", spb.DeleteTenantRequest(), INVALID),
    Row(DT, "unknown tenant", spb.DeleteTenantRequest(tenant_id="ghost"), NOT_FOUND),
    Row(DT, "tenant key is not admin", spb.DeleteTenantRequest(tenant_id="acme"), DENIED, auth="tenant"),
    Row(DT, "prefix look-alike of a tenant", spb.DeleteTenantRequest(tenant_id="acm"), NOT_FOUND),
    Row(DT, "path traversal", spb.DeleteTenantRequest(tenant_id="acme/.."), INVALID),
    Row(DT, "Cyrillic look-alike", spb.DeleteTenantRequest(tenant_id="аcme"), INVALID),
    Row(DT, "invalid UTF-8 tenant", utf8_bad(1), INVALID),
    Row(CT, "unknown template tenant", spb.CreateTenantRequest(tenant_id="fresh", template_tenant_id="ghost"),
        NOT_FOUND),
    Row(CT, "look-alike template tenant", spb.CreateTenantRequest(tenant_id="fresh", template_tenant_id="аcme"),
        INVALID),
]

# Generic rows for every RPC, including ones added later.
GENERIC = {"missing authorization", "bearer without key", "unknown key", "malformed key", "oversize key",
           "truncated protobuf", "truncated protobuf without a key"}
ROWS += [row for rpc in all_rpcs() for row in (
    Row(rpc, "missing authorization", b"", UNAUTH, auth="none"),
    Row(rpc, "bearer without key", b"", UNAUTH, auth="Bearer "),
    Row(rpc, "unknown key", b"", UNAUTH, auth="Bearer egk_0123456789abcdef_" + "x" * 43),
    Row(rpc, "malformed key", b"", UNAUTH, auth="Bearer egk_zz_short"),
    Row(rpc, "oversize key", b"", UNAUTH, auth="Bearer " + "k" * 4000),
    Row(rpc, "truncated protobuf", b"\x0a\x05ab", INVALID),
    Row(rpc, "truncated protobuf without a key", b"\x0a\x05ab", UNAUTH, auth="none"),
)]


def _ids() -> list[str]:
    return [f"{r.rpc.split('/')[1]}: {r.name}" for r in ROWS]


@pytest.fixture(scope="module")
def tenant_key(hostile_server: RunningServer) -> str:
    return hostile_server.client().create_key(tenant_ids=["acme"])


def _metadata(auth: str, tenant_key: str) -> list[tuple[str, str]]:
    if auth == "admin":
        return admin_metadata()
    if auth == "tenant":
        return admin_metadata(tenant_key)
    if auth == "none":
        return []
    return [("authorization", auth)]


@pytest.mark.parametrize("row", ROWS, ids=_ids())
def test_hostile_request_gets_its_status_and_changes_nothing(row: Row, channel: grpc.Channel, tenant_key: str) -> None:
    before = snapshot(channel)
    code, _ = call(channel, row.rpc, row.request, metadata=_metadata(row.auth, tenant_key), timeout=row.timeout)
    assert code == row.code
    assert snapshot(channel) == before
    assert_serving(channel)


def test_every_rpc_has_specific_rows() -> None:
    """New RPCs get their own rows (ROWS above) besides the generic credential and decoding ones."""
    specific = {r.rpc for r in ROWS if r.name not in GENERIC}
    assert sorted(set(all_rpcs()) - specific) == []


def test_info_reports_the_configured_limits(channel: grpc.Channel) -> None:
    code, raw = call(channel, I, spb.InfoRequest(), metadata=admin_metadata())
    assert code == C.OK
    limits = spb.InfoResponse.FromString(raw).limits
    for name, value in LIMITS.items():
        assert getattr(limits, name) == value, name


def test_a_tenant_key_still_works_after_the_table(hostile_server: RunningServer, tenant_key: str) -> None:
    """The table did not lock out legitimate use: a real write and search through the tenant key."""
    client = hostile_server.client(tenant_key)
    memory_id = client.write("acme", "the hostile table is over").results[0].memory_id
    assert memory_id in [h.memory.memory_id for h in client.search("acme", "hostile table is over").hits]
    client.delete("acme", memory_id)
