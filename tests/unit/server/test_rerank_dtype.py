"""models.rerank_dtype: the cross-encoder's own precision ("" = models.dtype), so a cheaper reranker can be
chosen without changing the embedder (benchmarks/rerank_cost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.testing import build_tiny_cross_encoder
from server.app import load_reranker
from server.config import ConfigError, load_config


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("ce") / "model", seed=0)


@pytest.mark.parametrize(("dtype", "rerank_dtype", "expected"),
                         [("float32", "", "float32"), ("float32", "int8", "int8"), ("int8", "float32", "float32"),
                          ("bfloat16", "", "bfloat16")])
def test_the_cross_encoder_runs_in_its_own_dtype(tiny_dir: Path, tmp_path: Path, dtype: str, rerank_dtype: str,
                                                 expected: str) -> None:
    config = load_config(env={}, overrides={"data_dir": tmp_path, "models": {
        "reranker": str(tiny_dir), "dtype": dtype, "rerank_dtype": rerank_dtype}})
    reranker = load_reranker(config, "cpu")
    assert reranker is not None and reranker.describe()["dtype"] == expected


def test_an_unknown_rerank_dtype_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rerank_dtype"):
        load_config(env={}, overrides={"data_dir": tmp_path, "models": {"rerank_dtype": "int4"}})
