"""The foundation, end to end through the real server: real embedder, FAISS, Lucene, temp data dir."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from support import ADMIN_KEY, start_server, status_of

from server.engine.search import DENSE_WEIGHT, LEXICAL_WEIGHT, RRF_K
from server.fusion.calibration import fused_features, load_calibration
from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

DESIGN_EXAMPLES = [
    "用户团队计划下半年将核心数据库从自建改为托管，当前最关注迁移成本与停机时间",
    "用户项目编号是XJ-2026-0421",
    "User is allergic to peanuts",
]

FILLER = [
    "User's old project number was XJ-2026-0412, closed in March",
    "Project number XJ-2025-0421 was cancelled last year",
    "The pilot's project number is XJ-2026-0241",
    "The staging cluster id is XK-2026-0412 and runs in Frankfurt",
    "User prefers concise answers with bullet points",
    "User's daughter starts primary school in September",
    "The quarterly report is due on the first Monday of each quarter",
    "User drinks oat milk flat whites",
    "Invoice INV-2026-0042 was paid on 3 March",
    "User's manager is called Priya",
    "User is learning Rust in the evenings",
    "The team uses PostgreSQL 16 in production",
    "User's laptop is a 14-inch ThinkPad",
    "Ticket SUP-2026-0421 was about a login bug",
]


def test_write_then_search_returns_it_with_breakdown(admin) -> None:
    admin.create_tenant("acme/alice")
    reply = admin.write("acme/alice", *DESIGN_EXAMPLES)
    assert [r.outcome for r in reply.results] == [spb.WRITE_OUTCOME_CREATED] * 3
    ids = [r.memory_id for r in reply.results]
    result = admin.search("acme/alice", "does the user have a peanut allergy?", top_k=3)
    top = result.hits[0]
    assert top.memory.memory_id == ids[2]
    b = top.breakdown
    assert b.dense_rank == 1 and b.bm25_rank == 1
    assert 0 < b.relevance <= 1 and 0 < b.decay <= 1 and 0 < b.importance_weight <= 1
    assert b.final == pytest.approx(b.relevance * b.decay * b.importance_weight, rel=1e-5)
    assert result.timings.total_ns > 0 and result.timings.embed_ns > 0 and result.timings.batch_size >= 1
    chinese = admin.search("acme/alice", "数据库迁移的停机时间", top_k=1)
    assert chinese.hits[0].memory.memory_id == ids[0]


def test_bm25_finds_exact_code_that_dense_alone_ranks_poorly(admin) -> None:
    admin.create_tenant("acme/codes")
    admin.write("acme/codes", *FILLER, *DESIGN_EXAMPLES)
    query = "project number XJ-2026-0421"
    dense_only = admin.contents("acme/codes", query, top_k=5, dense_only=True)
    assert dense_only[0] != DESIGN_EXAMPLES[1], "dense alone should not rank the exact code first"
    hybrid = admin.search("acme/codes", query, top_k=5)
    assert hybrid.hits[0].memory.content == DESIGN_EXAMPLES[1]
    assert hybrid.hits[0].breakdown.bm25_rank == 1
    assert hybrid.hits[0].breakdown.dense_rank != 1


def test_a_key_for_one_tenant_cannot_touch_another(server, admin) -> None:
    for tenant in ("acme/a", "acme2/b", "globex"):
        admin.create_tenant(tenant)
    secret_b = admin.write("acme2/b", "tenant b's secret plan").results[0].memory_id
    acme = server.client(admin.create_key(prefixes=["acme/"]))
    assert acme.write("acme/a", "tenant a's memory").results[0].memory_id
    denied = grpc.StatusCode.PERMISSION_DENIED
    assert status_of(lambda: acme.write("acme2/b", "sneaky write")) == denied
    assert status_of(lambda: acme.search("acme2/b", "secret plan")) == denied
    assert status_of(lambda: acme.get("acme2/b", secret_b)) == denied
    assert status_of(lambda: acme.delete("acme2/b", secret_b)) == denied
    assert status_of(lambda: acme.list_all("acme2/b")) == denied
    assert status_of(lambda: acme.search("globex", "anything")) == denied
    assert status_of(lambda: acme.create_tenant("acme/new")) == denied  # admin only
    # The memory of tenant b is untouched and only tenant b sees it.
    assert admin.get("acme2/b", secret_b).memories[0].content == "tenant b's secret plan"
    assert admin.search("acme/a", "secret plan", top_k=5).hits[0].memory.content == "tenant a's memory"


def test_missing_or_bad_credentials_are_unauthenticated(server, admin) -> None:
    admin.create_tenant("t1")
    unauth = grpc.StatusCode.UNAUTHENTICATED
    assert status_of(lambda: server.client("").search("t1", "x")) == unauth
    assert status_of(lambda: server.client("egk_0123456789abcdef_notarealsecretatallreally").search("t1", "x")) == unauth
    bad_scheme = server.client("x")
    bad_scheme.metadata = [("authorization", f"Basic {ADMIN_KEY}")]
    assert status_of(lambda: bad_scheme.search("t1", "x")) == unauth


def test_restart_keeps_every_acknowledged_memory(tmp_path, jvm, embedder) -> None:
    data = tmp_path / "data"
    first = start_server(data, embedder=embedder)
    client = first.client()
    client.create_tenant("acme/alice")
    ids = [r.memory_id for r in client.write("acme/alice", *DESIGN_EXAMPLES, *FILLER).results]
    client.delete("acme/alice", ids[-1])
    first.stop()
    second = start_server(data, embedder=embedder)
    try:
        client = second.client()
        assert {m.memory_id for m in client.list_all("acme/alice")} == set(ids[:-1])
        assert client.contents("acme/alice", "XJ-2026-0421", top_k=1) == [DESIGN_EXAMPLES[1]]
        assert client.contents("acme/alice", "peanut allergy", top_k=1) == [DESIGN_EXAMPLES[2]]
        assert FILLER[-1] not in client.contents("acme/alice", "login bug ticket", top_k=20)
    finally:
        second.stop()


@pytest.mark.parametrize("bad", [
    spb.WriteRequest(tenant_id="t", memories=[]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="")]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok"), pb.MemoryInput(content="  ")]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="x" * 20000)]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok", importance=float("nan"))]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok", importance=1.5)]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok", confidence=float("inf"))]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok", type=42)]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok", created_at_ms=-5)]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok", key="a\x00b")]),
    spb.WriteRequest(tenant_id="t", memories=[pb.MemoryInput(content="ok", supersedes=["m_missing"])]),
    spb.WriteRequest(tenant_id="../t", memories=[pb.MemoryInput(content="ok")]),
    spb.WriteRequest(tenant_id="", memories=[pb.MemoryInput(content="ok")]),
])
def test_malformed_writes_are_invalid_and_change_nothing(admin, bad) -> None:
    admin.create_tenant("t")
    admin.write("t", "the one memory")
    code = status_of(lambda: admin.memory.Write(bad, metadata=admin.metadata))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert [m.content for m in admin.list_all("t")] == ["the one memory"]


@pytest.mark.parametrize("query", [
    pb.SearchQuery(text=""),
    pb.SearchQuery(text="ok", top_k=-1),
    pb.SearchQuery(text="ok", top_k=10**6),
    pb.SearchQuery(text="ok", lexical_only=True, dense_only=True),
    pb.SearchQuery(text="ok", filter=pb.Filter(types=[99])),
    pb.SearchQuery(text="ok", filter=pb.Filter(statuses=[17])),
    pb.SearchQuery(text="ok", filter=pb.Filter(min_importance=float("nan"))),
    pb.SearchQuery(text="ok", scoring=pb.Scoring(importance_weight=2.0)),
    pb.SearchQuery(text="ok", scoring=pb.Scoring(episodic_half_life_s=float("inf"))),
])
def test_malformed_searches_are_invalid(admin, query) -> None:
    admin.create_tenant("t")
    request = spb.SearchRequest(tenant_id="t", queries=[query])
    assert status_of(lambda: admin.memory.Search(request, metadata=admin.metadata)) == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_tenant_is_not_found_and_bad_page_token_invalid(admin) -> None:
    assert status_of(lambda: admin.search("nobody", "x")) == grpc.StatusCode.NOT_FOUND
    admin.create_tenant("t")
    assert status_of(lambda: admin.create_tenant("t")) == grpc.StatusCode.ALREADY_EXISTS
    request = spb.ListRequest(tenant_id="t", page_token="garbage!")
    assert status_of(lambda: admin.memory.List(request, metadata=admin.metadata)) == grpc.StatusCode.INVALID_ARGUMENT


def test_list_pages_through_everything_and_get_reports_missing(admin) -> None:
    admin.create_tenant("t")
    ids = [r.memory_id for r in admin.write("t", *[f"{w} is item {i}" for i, w in enumerate(WORDS)]).results]
    assert [m.memory_id for m in admin.list_all("t")] == ids
    reply = admin.get("t", ids[5], "m_nope")
    assert [m.memory_id for m in reply.memories] == [ids[5]] and list(reply.missing) == ["m_nope"]


WORDS = ["apple", "banana", "cherry", "delta", "echo", "falcon", "granite", "harbor", "island", "jungle", "kettle", "lantern", "meadow", "nickel", "orchid", "pepper", "quartz", "river", "saddle", "timber", "umbrella", "violet", "walnut", "xylophone", "yacht", "zephyr", "anchor", "bridge", "canyon", "dune", "ember", "forest", "glacier", "hollow", "ivory", "jasmine", "kelp", "lagoon", "marble", "nectar", "oasis", "pebble", "quiver", "reef", "summit", "tundra", "upland", "valley", "willow"]


def test_info_health_and_reflection(server, admin) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    info = admin.memory.Info(spb.InfoRequest(), metadata=admin.metadata)
    assert info.device == "cpu" and info.embedder.dim == 384 and info.embedder.name == "multilingual-e5-small"   # the default
    assert info.limits.max_top_k > 0 and info.batching.max_batch_requests > 0
    channel = grpc.insecure_channel(server.address)
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="engram.v1.MemoryService"))
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    names = {s.name for s in replies[0].list_services_response.service}
    assert {"engram.v1.MemoryService", "engram.v1.AdminService"} <= names
    channel.close()


def test_every_hit_breakdown_agrees_with_single_retriever_searches(admin) -> None:
    """The hybrid breakdown's ranks are each retriever's own ranks (as dense-only and lexical-only
    searches of the same text report them), and rrf / relevance / final follow from them."""
    admin.create_tenant("acme/ranks")
    admin.write("acme/ranks", *FILLER, *DESIGN_EXAMPLES)
    query = "what milk does the user take in coffee"
    k, weights = RRF_K, (DENSE_WEIGHT, LEXICAL_WEIGHT)   # an English query without codes keeps both weights
    hybrid = admin.search("acme/ranks", query, top_k=10)
    dense = {h.memory.memory_id: h.breakdown for h in admin.search("acme/ranks", query, top_k=100, dense_only=True).hits}
    lexical = {h.memory.memory_id: h.breakdown
               for h in admin.search("acme/ranks", query, top_k=100, lexical_only=True).hits}
    assert len(hybrid.hits) == 10 and any(h.breakdown.bm25_rank == 0 for h in hybrid.hits)
    for h in hybrid.hits:
        b, mid = h.breakdown, h.memory.memory_id
        assert (b.dense_rank, b.dense_score) == ((dense[mid].dense_rank, dense[mid].dense_score) if mid in dense
                                                 else (0, 0.0))
        assert (b.bm25_rank, b.bm25_score) == ((lexical[mid].bm25_rank, lexical[mid].bm25_score) if mid in lexical
                                               else (0, 0.0))
        want = sum(w / (k + r) for w, r in zip(weights, (b.dense_rank, b.bm25_rank), strict=True) if r > 0)
        assert b.rrf == pytest.approx(want, rel=1e-6)  # float on the wire
        assert b.final == pytest.approx(b.relevance * b.recency * b.importance_weight * b.temporal, rel=1e-5)
    # Relevance is the calibrated probability of the candidate's evidence (server/fusion/calibration.py).
    ids = {mid: i for i, mid in enumerate({**dense, **lexical, **{h.memory.memory_id: 0 for h in hybrid.hits}})}
    d_sorted = sorted(dense, key=lambda m: dense[m].dense_rank)
    l_sorted = sorted(lexical, key=lambda m: lexical[m].bm25_rank)
    hits = hybrid.hits
    cols = fused_features(np.array([ids[h.memory.memory_id] for h in hits]),
                          np.array([h.breakdown.rrf for h in hits]) / sum(w / (k + 1.0) for w in weights),
                          np.array([ids[m] for m in d_sorted]), np.array([dense[m].dense_score for m in d_sorted]),
                          np.array([ids[m] for m in l_sorted]), np.array([lexical[m].bm25_score for m in l_sorted]))
    want_rel = load_calibration().fused(cols)
    assert [h.breakdown.relevance for h in hits] == pytest.approx(want_rel.tolist(), rel=1e-4)
