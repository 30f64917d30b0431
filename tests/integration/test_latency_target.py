"""The rerank-depth controller through the real server, under synthetic load: concurrent clients against
an in-process server with a tiny cross-encoder. Asserts behaviour (the depth falls under load, returns
to the full depth when idle, Info and /metrics report it), never wall-clock figures."""

from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import torch
from support import start_server

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from models.threads import process_cpus
from server.app import set_process_threads
from server.batching.controller import WIDE_PROBE_EVERY

FULL = 12
# A tight target, so that the 2-core test machine is "under load" with a few dozen concurrent queries: a lone
# query's full-depth pass costs ~25 ms here (other stages ~18 ms, 12 pairs ~6 ms), 32 clients queue for hundreds.
# 100 ms falls under load every time and leaves a lone full pass room on a host with a core taken by something
# else (at 60 ms such a host held a lone query at depth 8-11 for 20 queries in a row).
TARGET_MS = 100.0
TENANT = "acme/load"


@pytest.fixture
def loaded_server(tmp_path, jvm, embedder, tiny_reranker):  # type: ignore[no-untyped-def]
    running = start_server(tmp_path / "data", embedder=embedder, reranker=tiny_reranker, metrics_listen="127.0.0.1:0",
                           search={"rerank_depth": FULL, "latency_target_ms": TARGET_MS},
                           batching={"query_cache_ttl_ms": 0})
    client = running.client()
    client.create_tenant(TENANT)
    client.write(TENANT, *[f"Project {i} shipped in week {i % 9} with {i * 3} open tickets." for i in range(40)])
    yield running, client
    running.stop()


def _idle_depth(client, tries: int = 20) -> int:  # type: ignore[no-untyped-def]
    """The depth of a lone query: the best of up to ``tries`` in a row, so that a loaded CI machine may slow a few,
    and the cost model, fed by each lone batch (an EWMA), may come back down from the load before it on a slow CPU
    (2-core Zen 1 in float32: all of the first five lone queries after the load at depth 0)."""
    best = 0
    for i in range(tries):
        best = max(best, client.search(TENANT, f"when did project {i} ship").timings.rerank_depth_used)
        if best == FULL:
            break
    return best


def test_depth_falls_under_load_and_returns_to_full_when_idle(loaded_server) -> None:
    running, client = loaded_server
    assert _idle_depth(client) == FULL

    def one(i: int) -> pb.QueryResult | grpc.StatusCode:
        try:
            return client.search(TENANT, f"which project had {i % 40 * 3} open tickets")
        except grpc.RpcError as exc:
            return exc.code()

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(one, range(192)))
    answered = [r for r in results if isinstance(r, pb.QueryResult)]
    assert answered, results[:5]
    depths = [r.timings.rerank_depth_used for r in answered]
    assert min(depths) < FULL, "under load some batches must run shallower than the full depth"
    assert max(r.timings.batch_size for r in answered) > 1
    # Hits past a query's depth are never reranked.
    for r in answered:
        assert sum(h.breakdown.HasField("rerank") for h in r.hits) <= max(r.timings.rerank_depth_used, 0)
    state = running.app.engine.controller.state()
    assert state.batches_reduced + state.batches_skipped > 0
    assert state.ms_answer > 0, "the answer time after a batch resolves is measured (and reserved)"

    assert _idle_depth(client) == FULL, "idle again: the full depth"
    info = client.memory.Info(spb.InfoRequest(), metadata=client.metadata).rerank_control
    assert (info.target_ms, info.full_depth, info.depth, info.device) == (TARGET_MS, FULL, FULL, "cpu")
    assert info.ms_per_pair > 0 and info.ms_per_query > 0
    assert info.batches_reduced + info.batches_skipped > 0 and info.batches_full > 0
    text = urllib.request.urlopen(f"http://127.0.0.1:{running.app.metrics_port}/metrics", timeout=10).read().decode()
    assert f"engram_rerank_latency_target_seconds {TARGET_MS / 1000}" in text
    assert f"engram_rerank_depth {float(FULL)}" in text and f"engram_rerank_depth_full {float(FULL)}" in text
    assert 'engram_rerank_batches_total{depth="full"}' in text and "engram_rerank_pair_seconds" in text
    # A lone query's cross-encoder pass takes the idle cores (every core of the process, on CPU), and the
    # device thread's torch threads (torch's OpenMP setting is per thread) are as set after it.
    threads = running.app.engine.device_pool.submit(torch.get_num_threads).result()
    assert threads == set_process_threads(0)
    assert info.idle_threads == (process_cpus() if process_cpus() > threads else 0)
    if info.idle_threads:   # measured at start; a lone batch goes wide when that is cheaper, or now and then anyway
        assert info.ms_per_pair_wide > 0
        assert "engram_rerank_batches_wide_total" in text and "engram_rerank_pair_seconds_wide" in text
        for i in range(WIDE_PROBE_EVERY):   # new texts: a pair-cache hit runs no pass
            client.search(TENANT, f"in which week did project {i + 20} ship")
        state = running.app.engine.controller.state()
        assert state.batches_wide > 0
        assert running.app.engine.device_pool.submit(torch.get_num_threads).result() == threads
    assert 0 <= info.load_scale <= 1 and info.tail_p95_ms > 0


def test_an_explicit_depth_is_honoured_and_the_controller_can_be_off(tmp_path, jvm, embedder, tiny_reranker) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, reranker=tiny_reranker,
                           search={"rerank_depth": FULL, "latency_target_ms": 0.0})
    try:
        client = running.client()
        client.create_tenant(TENANT)
        client.write(TENANT, *[f"Note {i} about the roadmap." for i in range(10)])
        assert client.search(TENANT, "roadmap").timings.rerank_depth_used == FULL
        assert client.search(TENANT, "roadmap", rerank_depth=3).timings.rerank_depth_used == 3
        assert client.search(TENANT, "roadmap", rerank_depth=-1).timings.rerank_depth_used == 0
        assert client.memory.Info(spb.InfoRequest(), metadata=client.metadata).rerank_control.target_ms == 0
    finally:
        running.stop()


def test_long_memories_get_a_smaller_depth_than_short_ones_under_the_same_target(tmp_path, jvm, embedder) -> None:
    """A pass is priced by its tokens: under one target a tenant of long memories (the cross-encoder reads each one's
    best ~800-character passage, server/engine/passages.py) gets a shallower rerank than one of short notes, which keeps the full depth. A MiniLM-shaped
    cross-encoder (random weights), so that a pass costs by its tokens as a real one does. The target is set from the
    cost models the server measured on a few warm-up searches of both tenants (every pass on the server's own
    threads, so one price model serves both), so the test holds on any CPU."""
    from models.reranker import HFCrossEncoder
    from models.testing import build_minilm_shaped_cross_encoder
    from server.engine.passages import best_passage

    reranker = HFCrossEncoder.load(build_minilm_shaped_cross_encoder(tmp_path / "ce"), device="cpu")
    running = start_server(tmp_path / "data", embedder=embedder, reranker=reranker, models={"idle_threads": 1},
                           search={"rerank_depth": FULL, "latency_target_ms": 0.0})
    try:
        client = running.client()
        words = "the migration plan moved the billing service to the new cluster after the audit".split()
        for tenant, texts in (("acme/short", [f"Project {i} shipped in week {i % 9}." for i in range(30)]),
                              ("acme/long", [f"Project {i} notes: " + " ".join(words[(i + j) % len(words)]
                                                                            for j in range(600)) for i in range(30)])):
            client.create_tenant(tenant)
            client.write(tenant, *texts)
        engine = running.app.engine
        query = "when did project 7 ship"
        long_read = best_passage(query, "Project 7 notes: " + " ".join(words * 40))   # what a long pair reads
        short_tokens, long_tokens = engine.search_pipeline.scorer.pair_tokens(
            [(query, "Project 7 shipped in week 7."), (query, long_read)])
        assert long_tokens > 8 * short_tokens, (short_tokens, long_tokens)
        # Warm-up at the full depth (no target): both pass sizes and the other stages measured.
        for i in range(4):
            client.search("acme/short", f"when did project {i + 20} ship")
            client.search("acme/long", f"notes of project {i + 20} about the migration")
        # The rerank budget a third of the way (geometrically) from the short tenant's full-depth pass to the long
        # one's, at the measured prices. The prices the controller learns over the searches below fall (a long pass
        # is cheaper per token than the warm-up said), so half-way let a noisy host's long tenant climb back to the
        # full depth ([11, 11, 12, 12, 12]); here the long pass keeps ~3x more than the budget, the short ~2x less.
        ctl = engine.controller
        short_pass, long_pass = FULL * short_tokens, FULL * long_tokens
        short_ms, long_ms = short_pass * ctl.tokens.tail_ms(short_pass), long_pass * ctl.tokens.tail_ms(long_pass)
        budget_ms = short_ms ** (2 / 3) * long_ms ** (1 / 3)
        ctl.target_ns = int((ctl.queries.per_unit_ms(1) + ctl.answer_ms(1) + budget_ms / 0.8) * 1e6)
        short = max(client.search("acme/short", f"when did project {i} ship").timings.rerank_depth_used
                    for i in range(5))
        long = [client.search("acme/long", f"notes of project {i} about the migration").timings.rerank_depth_used
                for i in range(5)]
        why = (short, long, short_tokens, long_tokens, short_ms, long_ms, budget_ms, ctl.state())
        assert short == FULL, why
        assert max(long) < FULL, why
    finally:
        running.stop()
