"""Batching through the real gRPC server: the embedding cache stays correct, Info reports the limits,
concurrent searches share batches, and a full queue answers RESOURCE_EXHAUSTED."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
from support import start_server, status_of

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb
from server.batching.batcher import MAX_BATCH_TOKENS, MAX_WAIT_MS


def test_repeated_query_skips_the_embedding_but_sees_every_write(server, admin) -> None:
    admin.create_tenant("acme/cache")
    admin.create_tenant("other/cache")
    admin.write("acme/cache", "The staging database password rotates every Friday.")
    admin.write("other/cache", "Unrelated note about lunch.")
    query = "when does the database password rotate"
    first = admin.search("acme/cache", query)
    assert first.timings.embed_ns > 0
    again = admin.search("acme/cache", query)
    assert again.timings.embed_ns == 0, "a repeated query should reuse its embedding"
    assert [h.memory.memory_id for h in again.hits] == [h.memory.memory_id for h in first.hits]
    # A write cannot change an embedding, but the search runs on the live index: the new memory shows.
    written = admin.write("acme/cache", "Since March the database password rotates every Monday instead.")
    after_write = admin.search("acme/cache", query)
    assert after_write.timings.embed_ns == 0
    assert written.results[0].memory_id in [h.memory.memory_id for h in after_write.hits]
    deleted = admin.delete("acme/cache", written.results[0].memory_id)
    assert deleted.deleted == 1
    after_delete = admin.search("acme/cache", query)
    assert written.results[0].memory_id not in [h.memory.memory_id for h in after_delete.hits]
    # Another tenant never rides on this tenant's cache entry.
    assert admin.search("other/cache", query).timings.embed_ns > 0


def test_info_reports_the_device_and_the_batching_limits(server, admin) -> None:
    info = admin.memory.Info(spb.InfoRequest(), metadata=admin.metadata)
    b = server.app.config.batching
    from models.devices import cpu_has_native_bf16

    auto = "bfloat16" if cpu_has_native_bf16() else "float32"  # models.dtype auto on a CPU
    assert info.device == "cpu" and info.embedder.device == "cpu" and info.embedder.dtype == auto
    assert (info.batching.enabled, info.batching.max_batch_requests, info.batching.max_batch_tokens,
            info.batching.max_wait_ms) == (True, b.max_batch_requests, MAX_BATCH_TOKENS, MAX_WAIT_MS)
    assert info.limits.queue_capacity == b.queue_capacity


def _search_many(admin, tenant: str, n: int) -> list[grpc.StatusCode | pb.QueryResult]:
    def one(i: int) -> grpc.StatusCode | pb.QueryResult:
        try:
            return admin.search(tenant, f"what happened with project {i % 7}")
        except grpc.RpcError as exc:
            return exc.code()

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_concurrent_searches_share_batches(server, admin) -> None:
    admin.create_tenant("acme/batch")
    admin.write("acme/batch", *[f"Project {i} shipped in week {i + 3}." for i in range(20)])
    results = _search_many(admin, "acme/batch", 24)
    assert all(isinstance(r, pb.QueryResult) for r in results)
    assert max(r.timings.batch_size for r in results) > 1  # type: ignore[union-attr]


def test_full_queue_answers_resource_exhausted_and_the_server_recovers(tmp_path, jvm, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder,
                           batching={"queue_capacity": 1, "max_batch_requests": 1, "query_cache_ttl_ms": 0})
    try:
        admin = running.client()
        admin.create_tenant("acme/full")
        admin.write("acme/full", "One memory.")
        results = _search_many(admin, "acme/full", 24)
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in results
        assert any(isinstance(r, pb.QueryResult) for r in results)
        assert status_of(lambda: admin.search("acme/full", "one")) == grpc.StatusCode.OK
    finally:
        running.stop()


def test_concurrent_writes_share_embedding_passes(server, admin) -> None:
    admin.create_tenant("acme/writes")
    stats = server.app.engine.write_batcher.stats
    before_batches, before_items = stats.batches, stats.items
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda i: admin.write("acme/writes", f"Write number {i} about topic {i * 7}."),
                                range(32)))
    assert all(r.results[0].memory_id for r in replies)
    batches, items = stats.batches - before_batches, stats.items - before_items
    assert items == 32 and batches < 32, "concurrent writes should share embedding passes"
    assert len(admin.list_all("acme/writes")) == 32


def test_info_reports_the_limits_in_effect_when_batching_is_off(tmp_path, jvm, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, batching={"max_batch_requests": 1})
    try:
        client = running.client()
        info = client.memory.Info(spb.InfoRequest(), metadata=client.metadata)
        assert (info.batching.enabled, info.batching.max_batch_requests, info.batching.max_wait_ms) == (False, 1, 0.0)
        client.create_tenant("acme/off")
        client.write("acme/off", "Batching is off on this server.")
        assert client.search("acme/off", "is batching on").timings.batch_size == 1
    finally:
        running.stop()
