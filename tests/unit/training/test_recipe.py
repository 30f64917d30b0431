"""The reranker recipe end to end on a tiny random encoder and a handful of pairs: it trains, saves a
loadable fp16 folder with provenance, evaluates, and two runs with one seed give identical weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.quality.datasets import DataMissing, load_scifact
from models.reranker import HFCrossEncoder
from models.testing import build_tiny_encoder
from training import mine as mining
from training.data import Group, MinedQuery, build_groups, is_dev, sentence_queries
from training.evaluate import compare, reorder
from training.recipe import parse, run
from training.train import TrainConfig, train

DOCS = {
    "d1": "Aspirin lowers the risk of heart attack. It thins the blood. Doses vary by age and weight in adults.",
    "d2": "Vitamin D is made in the skin under sunlight. Deficiency weakens bones. Supplements help in winter months.",
    "d3": "Insulin regulates blood sugar. Diabetes follows when cells ignore insulin signals for many years.",
    "d4": "Malaria is carried by mosquitoes. Nets and drugs reduce infections in children across Africa.",
}


def _groups() -> list[Group]:
    return [Group(query="what thins the blood", passages=(DOCS["d1"], DOCS["d2"], DOCS["d4"])),
            Group(query="sunlight and bones", passages=(DOCS["d2"], DOCS["d3"], DOCS["d1"])),
            Group(query="blood sugar hormone", passages=(DOCS["d3"], DOCS["d4"], DOCS["d2"])),
            Group(query="mosquito disease", passages=(DOCS["d4"], DOCS["d1"], DOCS["d3"]))]


@pytest.fixture(scope="module")
def tiny_init(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"), seed=3)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_training_is_deterministic_and_fits_the_pairs(tiny_init: Path, precision: str) -> None:
    cfg = TrainConfig(layers=0, max_length=64, groups_per_step=2, epochs=6, lr=1e-3, head_lr=1e-2,
                      warmup_share=0.1, seed=7, threads=1, log_every=2, precision=precision)
    _, model_a, history = train(_groups(), init_path=tiny_init, cfg=cfg)
    _, model_b, _ = train(_groups(), init_path=tiny_init, cfg=cfg)
    state_a, state_b = model_a.state_dict(), model_b.state_dict()
    assert all(bool((state_a[k] == state_b[k]).all()) for k in state_a)
    assert history[-1]["loss"] < history[0]["loss"]
    _, model_c, _ = train(_groups(), init_path=tiny_init, cfg=TrainConfig(**{**cfg.__dict__, "seed": 8}))
    assert any(not bool((state_a[k] == model_c.state_dict()[k]).all()) for k in state_a)


def test_boolean_options_parse_false() -> None:
    assert parse([]).uniform_last_attention is True
    assert parse(["--uniform-last-attention", "false"]).uniform_last_attention is False
    assert parse(["--uniform-last-attention", "1"]).uniform_last_attention is True
    with pytest.raises(SystemExit):
        parse(["--uniform-last-attention", "maybe"])


def test_precision_names() -> None:
    import torch

    from training.train import autocast_dtype

    assert autocast_dtype("bfloat16") == torch.bfloat16 and autocast_dtype("float32") is None
    assert autocast_dtype("auto") in (torch.bfloat16, None)
    with pytest.raises(ValueError, match="precision"):
        autocast_dtype("fp8")


def test_groups_exclude_positives_and_are_seeded() -> None:
    mined = [MinedQuery(id="q1", text="t", positives=("d1",), candidates=("d1", "d2", "d3", "d4")),
             MinedQuery(id="q2", text="u", positives=("d2",), candidates=("d2", "d3"))]  # too few negatives
    groups = build_groups(mined, DOCS, negatives=2, seed=1)
    assert len(groups) == 1 and groups[0].passages[0] == DOCS["d1"]
    assert DOCS["d1"] not in groups[0].passages[1:]
    assert build_groups(mined, DOCS, negatives=2, seed=1) == groups


def test_sentence_queries_drop_the_sentence_from_the_positive() -> None:
    out = sentence_queries(DOCS, count=2, seed=0, min_words=3)
    assert out == sentence_queries(DOCS, count=2, seed=0, min_words=3)
    for doc_id, sentence, rest in out:
        assert sentence in DOCS[doc_id] and sentence not in rest


def test_dev_split_is_stable() -> None:
    assert [is_dev(str(i), dev_share=0.15) for i in range(50)] == [is_dev(str(i), dev_share=0.15) for i in range(50)]
    assert 0 < sum(is_dev(str(i), dev_share=0.15) for i in range(400)) < 120


def test_reorder_puts_reranked_head_first_and_keeps_the_tail() -> None:
    assert reorder(["a", "b", "c", "d"], np.array([0.1, 2.0, 0.5], dtype=np.float32)) == ["b", "c", "a", "d"]
    mined = [MinedQuery(id="q", text="t", positives=("b",), candidates=("a", "b", "c"))]
    scores = compare(mined, {"q": np.array([0.0, 3.0], dtype=np.float32)}, ks=(1,))
    assert scores["bm25"]["ndcg@1"] == 0.0 and scores["bm25+rerank"]["ndcg@1"] == 1.0


def _write_cache(cache: Path) -> None:
    try:
        ids = [d.id for d in load_scifact(split="train").docs[:12]]
    except DataMissing as exc:
        pytest.skip(str(exc))
    cache.mkdir(parents=True)
    claims = [MinedQuery(id=str(i), text=f"claim {i}", positives=(ids[i],), candidates=tuple(ids)) for i in range(8)]
    selfsup = [MinedQuery(id="ss-0", text="a sentence", positives=(ids[0],), candidates=tuple(ids[1:]),
                          positive_text="the rest of the document")]
    mining.save(cache / mining.TRAIN_FILE, claims)
    mining.save(cache / mining.SELFSUP_FILE, selfsup)
    mining.save(cache / mining.TEST_FILE, claims[:3])
    turns = {f"locomo/conv-x/D1:{i}/raw": f"turn {i} of a chat about hiking trails" for i in range(4)}
    mining.save(cache / mining.LOCOMO_FILE, [MinedQuery(id="locomo-conv-x-D1:0", text="hiking trails",
                                                        positives=(next(iter(turns)),), candidates=tuple(turns)[1:])])
    (cache / mining.LOCOMO_TURNS_FILE).write_text(json.dumps(turns), encoding="utf-8")


def test_recipe_end_to_end_is_reproducible(tiny_init: Path, tmp_path: Path) -> None:
    _write_cache(tmp_path / "cache")
    reports = []
    for name in ("a", "b"):
        out = tmp_path / name
        reports.append(run(parse(["--init", str(tiny_init), "--cache", str(tmp_path / "cache"), "--out", str(out),
                                  "--layers", "0", "--max-length", "64",
                                  "--eval-depth", "5", "--threads", "1", "--negatives", "2", "--selfsup", "1",
                                  "--locomo", "1"])))
        assert (out / "model.safetensors").stat().st_size < 50 << 20
        meta = json.loads((out / "engram_provenance.json").read_text())
        assert meta["name"] == "engram-reranker-v1" and meta["random_weights"] is False
        assert meta["data"]["locomo_queries"] == meta["data"]["locomo_groups"] == 1
        assert meta["data"]["never_used"].endswith("LoCoMo questions, answers and evidence labels")
        assert "never the LoCoMo questions, answers or evidence labels" in meta["provenance"]
        evaluated = json.loads((out / "training_log.json").read_text())["eval"]
        assert evaluated["scifact_test"]["bm25"]["queries"] == 3
        assert evaluated["max_length"] == 64  # scored at the length trained at, as the server reads it
        loaded = HFCrossEncoder.load(out, device="cpu", max_length=0)
        assert loaded.name == "engram-reranker-v1" and loaded.max_length == 64
        assert HFCrossEncoder.load(out, device="cpu", max_length=512).max_length == 64  # capped at the limit
    assert reports[0]["weights_sha256"] == reports[1]["weights_sha256"]
    assert reports[0]["eval"] == reports[1]["eval"] or _same_scores(reports[0]["eval"], reports[1]["eval"])


def _same_scores(a: dict, b: dict) -> bool:
    return all(a[s][v] == b[s][v] for s in ("scifact_dev", "scifact_test") for v in a[s] if v != "rerank_s")
