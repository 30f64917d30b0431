"""The unpadded (packed-token) forward gives the padded network's vectors and scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models.embedder import HFEmbedder
from models.packaged import MINILM_NAME, minilm_path
from models.reranker import HFCrossEncoder
from models.testing import build_tiny_encoder
from models.unpadded import pack, supports
from tests.unit.models.test_embedder import MIXED as EMBED_MIXED

MIXED = EMBED_MIXED[:-1]
PAIRS = [(q, p) for q in ("tea", "what does Alice drink in the morning?") for p in MIXED]


def test_pack_lays_out_tokens_and_the_padded_slots() -> None:
    rows = [np.array([101, 7, 102]), np.array([101, 102]), np.array([101, 5, 6, 8, 102])]
    types = [np.zeros(len(r), dtype=np.int64) for r in rows]
    p = pack(rows, types, torch.device("cpu"))
    assert p["input_ids"].tolist() == [101, 7, 102, 101, 102, 101, 5, 6, 8, 102]
    assert p["position_ids"].tolist() == [0, 1, 2, 0, 1, 0, 1, 2, 3, 4]
    assert p["seq_index"].tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2, 2]
    assert p["starts"].tolist() == [0, 3, 5] and p["lengths"].tolist() == [3, 2, 5]
    mask = p["key_mask"].reshape(3, 5)
    assert mask.sum(1).tolist() == [3, 2, 5]
    # Gathering the packed tokens into the padded layout and scattering back is the identity.
    padded = p["input_ids"][p["gather"]].reshape(3, 5)
    assert padded[mask].tolist() == p["input_ids"].tolist()
    assert padded.reshape(-1)[p["scatter"]].tolist() == p["input_ids"].tolist()


@pytest.mark.parametrize("trace", [False, True])
def test_unpadded_embedder_gives_the_padded_vectors(minilm: HFEmbedder, trace: bool) -> None:
    model = HFEmbedder.load(minilm_path(), name=MINILM_NAME, dtype="float32", trace=trace, unpad=True)
    assert model.describe()["unpadded"] is True and minilm.describe()["unpadded"] is False
    np.testing.assert_allclose(model.embed(MIXED), minilm.embed(MIXED), atol=1e-5)
    np.testing.assert_allclose(model.embed(MIXED[1:2]), minilm.embed(MIXED[1:2]), atol=1e-5)


def test_unpadded_bfloat16_vector_does_not_depend_on_batch_mates(minilm: HFEmbedder) -> None:
    model = HFEmbedder.load(minilm_path(), name=MINILM_NAME, dtype="bfloat16", trace=True, unpad=True)
    together = model.embed(MIXED)
    alone = np.stack([model.embed([t])[0] for t in MIXED])
    assert float((together * alone).sum(1).min()) > 0.999
    assert float((together * minilm.embed(MIXED)).sum(1).min()) > 0.999


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_unpadded_tiny_encoder_pools_like_the_padded_one(tmp_path: Path, pooling: str) -> None:
    path = build_tiny_encoder(tmp_path / "enc", seed=3)
    padded = HFEmbedder.load(path, dtype="float32", pooling=pooling)  # type: ignore[arg-type]
    packed = HFEmbedder.load(path, dtype="float32", pooling=pooling, unpad=True, batch_size=4)  # type: ignore[arg-type]
    assert packed.describe()["unpadded"] is True
    np.testing.assert_allclose(packed.embed(MIXED), padded.embed(MIXED), atol=1e-5)


@pytest.mark.parametrize("trace", [False, True])
def test_unpadded_cross_encoder_gives_the_padded_scores(tiny_cross_encoder_dir: Path, trace: bool) -> None:
    padded = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="float32")
    packed = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="float32", trace=trace, unpad=True, batch_size=5)
    assert packed.describe()["unpadded"] is True
    np.testing.assert_allclose(packed.score(PAIRS), padded.score(PAIRS), atol=1e-5)


def test_two_label_cross_encoder_reads_its_positive_logit_unpadded(tmp_path: Path) -> None:
    from models.testing import build_tiny_cross_encoder

    path = build_tiny_cross_encoder(tmp_path / "ce2", seed=5, num_labels=2)
    padded = HFCrossEncoder.load(path, dtype="float32")
    packed = HFCrossEncoder.load(path, dtype="float32", unpad=True)
    assert packed.describe()["unpadded"] is True and packed.positive_label == 1
    np.testing.assert_allclose(packed.score(PAIRS), padded.score(PAIRS), atol=1e-5)


def test_int8_and_unsupported_models_keep_the_padded_forward(tiny_cross_encoder_dir: Path) -> None:
    int8 = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="int8", unpad=True)
    assert int8.describe()["unpadded"] is False
    from transformers import BertConfig, BertModel

    relative = BertModel(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                    position_embedding_type="relative_key"))
    assert supports(relative) is False


def test_a_mismatching_unpadded_forward_falls_back_to_padding(monkeypatch: pytest.MonkeyPatch,
                                                             tiny_cross_encoder_dir: Path) -> None:
    from models import unpadded

    original = unpadded.UnpaddedBert.forward

    def wrong(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return original(self, *args, **kwargs) + 1.0

    monkeypatch.setattr(unpadded.UnpaddedBert, "forward", wrong)
    model = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="float32", unpad=True)
    assert model.describe()["unpadded"] is False
    reference = HFCrossEncoder.load(tiny_cross_encoder_dir, dtype="float32")
    np.testing.assert_allclose(model.score(PAIRS), reference.score(PAIRS), atol=1e-6)
