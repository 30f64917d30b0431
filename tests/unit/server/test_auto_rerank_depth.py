"""search.rerank_depth = 0 picks the default depth from the precision the cross-encoder runs in."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.reranker import HFCrossEncoder
from models.testing import build_tiny_cross_encoder
from server.config import SearchConfig
from server.engine.search import auto_rerank_depth


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("ce") / "model", seed=0)


@pytest.mark.parametrize(("dtype", "depth"), [("float32", 5), ("bfloat16", 20), ("int8", 20)])
def test_reduced_precision_reranks_deeper(tiny_dir: Path, dtype: str, depth: int) -> None:
    assert auto_rerank_depth(HFCrossEncoder.load(tiny_dir, dtype=dtype)) == depth


def test_no_reranker_no_depth_and_auto_is_the_config_default() -> None:
    assert auto_rerank_depth(None) == 0
    assert SearchConfig().rerank_depth == 0
