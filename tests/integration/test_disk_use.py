"""Disk use through the real server: the free-space watermark (status, health, Stats, /metrics, writes resume
without a restart), automatic compaction (and a restart that reads the compacted log), audit segments (the
Audit RPC reads across them, retention expires old ones, a tenant purge removes them all)."""

from __future__ import annotations

import dataclasses
import os
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from small_fs import fill, small_filesystem
from support import start_server

from engram_proto.v1 import service_pb2 as spb

STORAGE = "engram.v1.Storage"


def storage_health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=STORAGE),
                                                         timeout=5).status


def wait_for(predicate, *, timeout_s: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_below_the_watermark_writes_are_refused_reads_go_on_and_writes_resume(tmp_path: Path, jvm: None,
                                                                               embedder) -> None:
    with small_filesystem(tmp_path / "fs", size_mb=48) as fs:
        running = start_server(fs / "data", embedder=embedder, storage={"min_free_mb": 16},
                               metrics_listen="127.0.0.1:0")
        try:
            client = running.client()
            client.create_tenant("disk/a")
            kept = client.write("disk/a", "the heron nests by the cobalt river", "quince jam in the pantry")
            filler = fill(fs, leave_bytes=8 << 20)   # below the 16 MiB watermark, far from full
            with pytest.raises(grpc.RpcError) as refused:
                client.write("disk/a", "this write must not be applied")
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "storage full" in (refused.value.details() or "")
            assert client.contents("disk/a", "heron river", lexical_only=True) == [
                "the heron nests by the cobalt river"]                     # reads go on
            assert len(client.get("disk/a", *[r.memory_id for r in kept.results]).memories) == 2
            assert [m.content for m in client.list_all("disk/a")].count("this write must not be applied") == 0
            stats = client.admin.Stats(spb.StatsRequest(), metadata=client.metadata).storage
            assert stats.low and stats.writes_refused >= 1 and stats.min_free_bytes == 16 << 20
            assert 0 < stats.free_bytes < 16 << 20 and stats.log_bytes > 0 and stats.audit_bytes > 0
            assert stats.top_tenants[0].tenant_id == "disk/a"
            assert wait_for(lambda: storage_health(running.address) == health_pb2.HealthCheckResponse.NOT_SERVING)
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{running.app.metrics_port}/metrics").read().decode()
            assert "engram_storage_low 1.0" in metrics and "engram_storage_free_bytes " in metrics
            assert 'grpc_code="RESOURCE_EXHAUSTED",grpc_method="Write"' in metrics
            assert 'grpc_code="INTERNAL"' not in metrics
            filler.unlink()                                               # space returns: no restart
            client.write("disk/a", "written once space came back")
            assert client.contents("disk/a", "space came back", lexical_only=True) == ["written once space came back"]
            assert wait_for(lambda: storage_health(running.address) == health_pb2.HealthCheckResponse.SERVING)
            stats = client.admin.Stats(spb.StatsRequest(), metadata=client.metadata).storage
            assert not stats.low
        finally:
            running.stop()


def test_compaction_runs_by_itself_and_a_restart_reads_the_compacted_log(tmp_path: Path, jvm: None,
                                                                         embedder) -> None:
    options = {"storage": {"compact_min_mb": 0.05, "compact_ratio": 2.0}, "access_top_hits": 0}
    running = start_server(tmp_path / "data", embedder=embedder, **options)
    client = running.client()
    client.create_tenant("compact/a")
    ids = [r.memory_id for r in client.write("compact/a", *[f"note {i} about walnut{i} and the harbor"
                                                           for i in range(60)]).results]
    client.delete("compact/a", *ids[10:])
    client.memory.Touch(spb.TouchRequest(tenant_id="compact/a", memory_ids=ids[:10]), metadata=client.metadata)

    def tenant() -> spb.TenantStats:
        return client.admin.Stats(spb.StatsRequest(tenant_id="compact/a"), metadata=client.metadata).tenants[0]

    before = tenant().log_bytes
    compacted = wait_for(lambda: tenant().compactions >= 1)
    after = tenant()
    assert compacted and after.log_bytes < before / 3, (before, after)
    assert client.contents("compact/a", "walnut3 harbor", lexical_only=True)[0] == "note 3 about walnut3 and the harbor"
    expected = sorted((m.memory_id, m.content, m.access_count) for m in client.list_all("compact/a"))
    assert len(expected) == 10 and all(count == 1 for _, _, count in expected)   # the touch folded in
    running.stop()
    running = start_server(tmp_path / "data", embedder=embedder, **options)
    try:
        client = running.client()
        assert sorted((m.memory_id, m.content, m.access_count) for m in client.list_all("compact/a")) == expected
        assert client.contents("compact/a", "walnut7", lexical_only=True) == ["note 7 about walnut7 and the harbor"]
        assert client.contents("compact/a", "walnut42", lexical_only=True) == []   # deleted stays deleted
        assert client.search("compact/a", "note 5 about walnut5 and the harbor", dense_only=True).hits[0].memory.content \
            == "note 5 about walnut5 and the harbor"
    finally:
        running.stop()


def test_the_audit_rpc_reads_across_segments_and_retention_expires_old_ones(tmp_path: Path, jvm: None,
                                                                            embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder,
                           memory={"audit_max_mb": 0, "audit_retention_days": 30})
    try:   # 64 KiB segments (a constant of the audit log): the shards load after this
        registry = running.app.engine.registry
        registry.audit = dataclasses.replace(registry.audit, segment_bytes=1 << 16)
        client = running.client()
        client.create_tenant("audit/a")
        ids = [r.memory_id for r in client.write("audit/a", *[f"memory {i}" for i in range(12)]).results]
        for _ in range(250):   # ~400 bytes a line: past one 64 KiB segment
            client.memory.Touch(spb.TouchRequest(tenant_id="audit/a", memory_ids=ids), metadata=client.metadata)
        directory = running.app.engine.registry.directory("audit/a")

        def read_all(token: str = "") -> tuple[list[spb.AuditEntry], str]:
            out, first_token = [], ""
            while True:
                reply = client.memory.Audit(spb.AuditRequest(tenant_id="audit/a", page_size=100, page_token=token),
                                            metadata=client.metadata)
                out.extend(reply.entries)
                first_token = first_token or reply.next_page_token
                token = reply.next_page_token
                if not token:
                    return out, first_token

        entries, first_page_token = read_all()
        segments = sorted(directory.glob("audit-*.log"))
        assert len(segments) >= 2
        assert [e.op for e in entries].count(spb.AUDIT_OP_USE) == 250 and entries[0].op == spb.AUDIT_OP_WRITE
        assert [e.entry_id for e in entries] == sorted({e.entry_id for e in entries})   # increasing, unique
        old = time.time() - 40 * 86400
        os.utime(segments[0], (old, old))                                  # its last line is 40 days old
        assert wait_for(lambda: not segments[0].exists())                  # the periodic flush applies retention
        kept, _ = read_all()
        assert 0 < len(kept) < len(entries) and kept[-1].entry_id == entries[-1].entry_id
        assert kept[0].op == spb.AUDIT_OP_USE and kept[0].entry_id >= 1 << 40
        resumed, _ = read_all(first_page_token)                            # a token into the expired segment
        assert resumed[0].entry_id == kept[0].entry_id
        client.admin.DeleteTenant(spb.DeleteTenantRequest(tenant_id="audit/a"), metadata=client.metadata)
        assert not directory.exists()                                      # a purge takes the audit with it
    finally:
        running.stop()
