"""HFCrossEncoder on tiny random BERT classifiers built locally."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from models.base import ModelLoadError, Reranker
from models.reranker import HFCrossEncoder
from models.testing import build_tiny_cross_encoder

PAIRS = [
    ("what does alice drink", "Alice prefers green tea in the morning."),
    ("q", ""),
    ("meeting time", "The design review moved to Thursday afternoon after the product launch was delayed."),
    ("what does alice drink", "Bob likes coffee."),
    ("a much longer query about where the project repository and its benchmarks live", "in the repo"),
]


def test_builds_and_loads_through_hf_loader(tiny_cross_encoder_dir: Path) -> None:
    model = HFCrossEncoder.load(tiny_cross_encoder_dir)
    assert isinstance(model, Reranker)
    info = model.describe()
    assert info["architecture"] == "BertForSequenceClassification"
    assert info["num_labels"] == 1 and info["random_weights"] is True
    assert "NOT TRAINED" in info["provenance"] and info["device"] == "cpu"
    scores = model.score(PAIRS)
    assert scores.shape == (len(PAIRS),) and scores.dtype == np.float32
    assert np.unique(scores).size == len(PAIRS)  # random weights still tell inputs apart


def test_scores_are_deterministic(tiny_cross_encoder_dir: Path, tmp_path: Path) -> None:
    first = HFCrossEncoder.load(tiny_cross_encoder_dir).score(PAIRS)
    again = HFCrossEncoder.load(tiny_cross_encoder_dir).score(PAIRS)
    rebuilt = HFCrossEncoder.load(build_tiny_cross_encoder(tmp_path / "same", seed=0)).score(PAIRS)
    other = HFCrossEncoder.load(build_tiny_cross_encoder(tmp_path / "other", seed=1)).score(PAIRS)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(rebuilt, first, atol=1e-6)
    assert not np.allclose(other, first, atol=1e-3)


def test_order_preserved_batch_equals_one_by_one(tiny_cross_encoder_dir: Path) -> None:
    model = HFCrossEncoder.load(tiny_cross_encoder_dir, batch_size=2)
    batched = model.score(PAIRS)
    np.testing.assert_allclose(model.score(PAIRS[::-1])[::-1], batched, atol=1e-5)
    single = np.array([model.score([pair])[0] for pair in PAIRS])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_scores_are_raw_logits_of_the_head(tiny_cross_encoder_dir: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_cross_encoder_dir))
    network = AutoModelForSequenceClassification.from_pretrained(str(tiny_cross_encoder_dir)).eval()
    query, passage = PAIRS[2]
    with torch.inference_mode():
        logits = network(**tokenizer(query, passage, return_tensors="pt")).logits
    np.testing.assert_allclose(model.score([(query, passage)]), logits[:, 0].numpy(), atol=1e-5)


def test_two_label_head_uses_positive_class(tmp_path: Path) -> None:
    folder = build_tiny_cross_encoder(tmp_path / "two", seed=3, num_labels=2)
    positive = HFCrossEncoder.load(folder)
    negative = HFCrossEncoder.load(folder, positive_label=0)
    assert positive.positive_label == 1
    assert not np.allclose(positive.score(PAIRS), negative.score(PAIRS))
    with pytest.raises(ModelLoadError, match="out of range"):
        HFCrossEncoder.load(folder, positive_label=2)


def test_three_label_head_needs_positive_label(tmp_path: Path) -> None:
    folder = build_tiny_cross_encoder(tmp_path / "three", num_labels=3)
    with pytest.raises(ModelLoadError, match="positive_label"):
        HFCrossEncoder.load(folder)
    assert HFCrossEncoder.load(folder, positive_label=2).score(PAIRS[:2]).shape == (2,)


def test_pairs_are_truncated_to_max_length(tiny_cross_encoder_dir: Path) -> None:
    model = HFCrossEncoder.load(tiny_cross_encoder_dir, max_length=16)
    counts = model.count_tokens([("word " * 50, "other " * 50), ("a", "b")])
    assert counts == [16, 5]
    assert model.score([("word " * 50, "other " * 50)]).shape == (1,)


def test_max_length_zero_reads_the_models_own_limit(tiny_cross_encoder_dir: Path) -> None:
    limit = json.loads((tiny_cross_encoder_dir / "tokenizer_config.json").read_text())["model_max_length"]
    assert HFCrossEncoder.load(tiny_cross_encoder_dir, max_length=0).max_length == limit
    with pytest.raises(ModelLoadError, match="max_length"):
        HFCrossEncoder.load(tiny_cross_encoder_dir, max_length=1)


def test_empty_input_and_warmup(tiny_cross_encoder_dir: Path) -> None:
    model = HFCrossEncoder.load(tiny_cross_encoder_dir)
    assert model.score([]).shape == (0,)
    model.warmup()


def test_int8_keeps_the_order_of_float32_scores(tiny_cross_encoder_dir: Path) -> None:
    exact = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="float32").score(PAIRS)
    model = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="int8")
    assert model.describe()["dtype"] == "int8"
    approx = model.score(PAIRS)
    assert approx.dtype == np.float32 and not np.array_equal(approx, exact)  # quantized, not the same network
    # A tiny random network has a narrow logit range, so int8 noise is relatively large here; the
    # packaged MiniLM's int8 vectors are checked tightly in test_embedder.py.
    assert float(np.corrcoef(approx, exact)[0, 1]) > 0.8


@pytest.mark.parametrize("trace", [False, True])
def test_an_int8_logit_is_the_pairs_own_whatever_it_is_batched_with(tiny_cross_encoder_dir: Path, trace: bool) -> None:
    # One activation scale per pass: in a shared pass a pair's logit moves with its batch-mates (other tenants'
    # queries among them), so int8 scores each pair in a pass of its own.
    model = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="int8", trace=trace)
    assert model.describe()["batch_size"] == 1
    loud = [("q " * 40, "an outlier " * 60)] * 3
    alone = np.concatenate([model.score([pair]) for pair in PAIRS])
    assert np.array_equal(model.score(PAIRS + loud)[:len(PAIRS)], alone)
    assert np.array_equal(model.score(loud + PAIRS[::-1])[len(loud):][::-1], alone)
    batched = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="int8", trace=trace, batch_size=32)
    assert not np.array_equal(batched.score(PAIRS + loud)[:len(PAIRS)], alone)   # what a shared pass did


@pytest.mark.parametrize("trace", [False, True])
def test_bfloat16_scores_keep_float32_resolution(tiny_cross_encoder_dir: Path, trace: bool) -> None:
    exact = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="float32").score(PAIRS)
    model = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="bfloat16", trace=trace)
    assert model.describe()["dtype"] == "bfloat16" and model.describe()["traced"] is trace
    half = model.score(PAIRS)
    assert half.dtype == np.float32 and float(np.corrcoef(half, exact)[0, 1]) > 0.95
    # The head runs in float32: the logits are not confined to bfloat16's 8-bit grid.
    on_grid = torch.from_numpy(half).bfloat16().float().numpy()
    assert not np.array_equal(on_grid, half)
    single = np.array([model.score([pair])[0] for pair in PAIRS])
    np.testing.assert_allclose(single, half, atol=0.05)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_traced_cross_encoder_gives_the_eager_scores(tiny_cross_encoder_dir: Path, dtype: str) -> None:
    # Same micro-batches on both sides: int8 quantizes activations with one scale per batch.
    eager = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype=dtype, batch_size=2)
    traced = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype=dtype, trace=True, batch_size=2)
    assert traced.describe()["traced"] is True
    np.testing.assert_allclose(traced.score(PAIRS), eager.score(PAIRS), atol=1e-5)
