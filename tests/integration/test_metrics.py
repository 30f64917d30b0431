"""The Prometheus endpoint after real traffic, and request ids in structured logs."""

from __future__ import annotations

import io
import json
import logging
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import ADMIN_KEY, start_server

from server.grpc.interceptors import REQUEST_ID
from server.logs import configure_logging
from engram_client import EngramClient

SEARCH = {"grpc_type": "unary", "grpc_service": "engram.v1.MemoryService", "grpc_method": "Search"}


def scrape(port: int) -> tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    return text, samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_show_requests_stages_batches_queues_tenants_and_errors(tmp_path: Path, jvm: None,
                                                                         embedder) -> None:
    running = start_server(tmp_path / "data", embedder=embedder, metrics_listen="127.0.0.1:0")
    try:
        port = running.app.metrics_port
        assert port > 0
        with EngramClient(running.address, key=ADMIN_KEY) as engram:
            engram.create_tenant("secret-tenant-name")
            engram.write("secret-tenant-name", ["the cat sleeps on the sofa", "the dog barks at night"])
            engram.search_many("secret-tenant-name", ["cat", "dog", "sofa"])
            with pytest.raises(grpc.RpcError):
                engram.search("no-such-tenant", "x")
        text, samples = scrape(port)

        assert value(samples, "grpc_server_started_total", **SEARCH) == 2
        assert value(samples, "grpc_server_handled_total", **SEARCH, grpc_code="OK") == 1
        assert value(samples, "grpc_server_handled_total", **SEARCH, grpc_code="NOT_FOUND") == 1
        assert value(samples, "grpc_server_handling_seconds_count", **SEARCH) == 2
        assert value(samples, "grpc_server_handling_seconds_sum", **SEARCH) > 0
        assert value(samples, "grpc_server_handled_total", grpc_type="unary", grpc_service="engram.v1.AdminService",
                     grpc_method="CreateTenant", grpc_code="OK") == 1

        assert value(samples, "engram_search_queries_total") == 3
        for stage in ("queue", "embed", "ann", "bm25", "total"):
            assert value(samples, "engram_search_stage_seconds_count", stage=stage) == 3, stage
        assert value(samples, "engram_search_stage_seconds_sum", stage="embed") > 0
        assert value(samples, "engram_search_batch_size_count") == 3
        assert value(samples, "engram_search_batch_size_sum") >= 3

        assert value(samples, "engram_queue_depth", batcher="search") == 0
        assert value(samples, "engram_queue_capacity", batcher="search") == 1024
        assert value(samples, "engram_batches_total", batcher="search") >= 1
        assert value(samples, "engram_batch_items_total", batcher="search") == 3
        assert value(samples, "engram_batch_items_total", batcher="write-embed") == 1
        assert value(samples, "engram_tenants_loaded") == 1
        assert "secret-tenant-name" not in text and "no-such-tenant" not in text  # no tenant ids as labels
    finally:
        running.stop()
    with pytest.raises(OSError):  # the endpoint goes away with the server
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_metrics_are_off_unless_configured(server) -> None:
    assert server.app.metrics is None and server.app.metrics_port == 0


def test_json_logs_carry_the_request_id(server) -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging(level="INFO", fmt="json", request_id=REQUEST_ID, handler=logging.StreamHandler(stream))
        with EngramClient(server.address, key=ADMIN_KEY) as engram:
            with pytest.raises(grpc.RpcError):
                engram.call("Search", _search_request("missing"), )
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
    failed = [r for r in records if "NOT_FOUND" in r["message"]]
    assert failed, records
    rid = failed[0]["request_id"]
    assert len(rid) == 16 and rid in failed[0]["message"]  # the SDK's x-request-id, echoed by the edge
    assert {"ts", "level", "logger", "message", "request_id"} <= set(failed[0])


def _search_request(tenant: str):  # type: ignore[no-untyped-def]
    from engram_client._core import search_request

    return search_request(tenant, ["x"], {})
