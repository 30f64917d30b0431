from __future__ import annotations

from pathlib import Path

import pytest

from models.embedder import HFEmbedder
from models.packaged import MINILM_NAME, minilm_path, minilm_provenance
from models.testing import build_tiny_cross_encoder


@pytest.fixture(scope="session")
def minilm() -> HFEmbedder:
    """Float32 on every CPU: the exact reference the other dtypes are compared with."""
    return HFEmbedder.load(minilm_path(), name=MINILM_NAME, provenance=minilm_provenance(), dtype="float32")


@pytest.fixture(scope="session")
def tiny_cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce") / "model", seed=0)
