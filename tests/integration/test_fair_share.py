"""Fair share per tenant through the real server: a tenant flooding the search queue beside a quiet one.
The quiet tenant is never refused and its queries ride in batches the flood cannot grow (at most the
quantum of the noisy tenant's queries beside its own); the flood meets RESOURCE_EXHAUSTED beyond its
share of the queue; Stats counts each tenant's rejections. Behaviour, not wall-clock numbers."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
from support import start_server

from engram_proto.v1 import service_pb2 as spb

QUANTUM = 2


def test_a_flooding_tenant_is_capped_per_batch_and_refused_beyond_its_share(tmp_path, jvm, embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder,
                           batching={"queue_capacity": 16, "query_cache_ttl_ms": 0})
    running.app.engine.search_batcher.tenant_quantum = QUANTUM   # a constant of the scheduler; 2 here, before traffic
    try:
        client = running.client()
        for tenant in ("fair/noisy", "fair/quiet"):
            client.create_tenant(tenant)
            client.write(tenant, *[f"Ticket {i} was closed by team {i % 5}." for i in range(20)])
        stop = threading.Event()
        noisy: list[grpc.StatusCode] = []

        def flood(i: int) -> None:
            while not stop.is_set():
                try:
                    client.search("fair/noisy", f"who closed ticket {i}")
                    noisy.append(grpc.StatusCode.OK)
                except grpc.RpcError as exc:
                    noisy.append(exc.code())

        with ThreadPoolExecutor(32) as pool:
            for i in range(32):
                pool.submit(flood, i)
            quiet = []
            try:
                while len(quiet) < 25 or grpc.StatusCode.RESOURCE_EXHAUSTED not in noisy:
                    quiet.append(client.search("fair/quiet", f"which team closed ticket {len(quiet) % 20}"))
                    if len(quiet) > 400:
                        break
            finally:
                stop.set()
        assert noisy.count(grpc.StatusCode.OK) > 0
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in noisy, "the flood should meet its share of the queue"
        assert set(noisy) <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}
        # Every quiet query was answered, in batches holding at most QUANTUM of the noisy tenant's.
        assert all(r.hits for r in quiet)
        assert max(r.timings.batch_size for r in quiet) <= QUANTUM + 1
        by_tenant = {t.tenant_id: t for t in client.admin.Stats(spb.StatsRequest(), metadata=client.metadata).tenants}
        assert by_tenant["fair/noisy"].rejected == noisy.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert by_tenant["fair/quiet"].rejected == 0
        assert by_tenant["fair/quiet"].queued == 0
    finally:
        running.stop()
