"""The GPU device-stage benchmark runs end to end on its CPU twin (tiny models, small index)."""

from __future__ import annotations

from benchmarks.gpu.device_stages import run


def test_device_stages_run_on_cpu_and_report_every_stage() -> None:
    result = run(device="cpu", n_memories=500, batch_sizes=[1, 4], rerank_depth=5, candidates=20, repeats=1,
                 tiny=True)
    assert result["dense_index"] == "torch-flat-cpu-float32"
    assert result["decay_ranker"] == "kernels.decay.decay_rank"
    assert [r["batch"] for r in result["rows"]] == [1, 4]
    for row in result["rows"]:
        assert row["embed_ms"] > 0 and row["ann_ms"] > 0 and row["rerank_ms"] > 0 and row["decay_ms"] > 0
        assert row["queries_per_s"] > 0
