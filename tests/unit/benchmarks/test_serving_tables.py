"""The serving benchmark's summaries: the rerank depths answers used, and the variant table's ratios."""

from __future__ import annotations

from benchmarks.serving.load import LoadResult, depth_summary
from benchmarks.serving.run import markdown


def test_depth_summary_reports_the_depths_answers_used() -> None:
    assert depth_summary([]) == {}
    s = depth_summary([20, 20, 0, 10])
    assert s == {"mean": 12.5, "p50": 15.0, "min": 0, "max": 20, "share_zero": 0.25, "share_max": 0.5}
    result = LoadResult(concurrency=1, seconds=1.0, latencies_ms=[5.0, 7.0], rerank_depths=[20, 13])
    assert result.summary()["rerank_depth_used"]["mean"] == 16.5


def row(variant: str, clients: int, qps: float, depth: dict | None = None) -> dict:  # type: ignore[type-arg]
    return {"variant": variant, "batching": "on", "concurrency": clients, "qps": qps, "p50_ms": 1.0, "p95_ms": 2.0,
            "p99_ms": 3.0, "mean_batch_size": 4.0, "rerank_depth_used": depth or {}}


def test_the_table_quotes_each_comparison_first_variant_over_second() -> None:
    results = {"datasets": [
        {"tenants": 1, "memories_per_tenant": 10000, "compare": "controller",
         "runs": [row("controller", 32, 120.0, {"mean": 0.5, "min": 0, "max": 11}), row("full-depth", 32, 8.0,
                                                                                     {"mean": 20.0, "min": 20, "max": 20})]},
        {"tenants": 100, "memories_per_tenant": 10000, "runs": [
            {**row("on", 8, 150.0), "variant": "on"}, {**row("off", 8, 50.0), "batching": "off"}]}]}
    lines = markdown(results).splitlines()
    assert "| 1 × 10k | 32 | controller | 120.0 |" in lines[2] and lines[2].endswith("| 0.5 (0-11) | 15.00× |")
    assert "| full-depth |" in lines[3] and lines[3].endswith("| 20.0 (20-20) |  |")
    assert "| 100 × 10k | 8 | on | 150.0 |" in lines[4] and lines[4].endswith("| – | 3.00× |")
