"""The server's default reranker is engram-reranker-v1 when its weights are present, else none."""

from __future__ import annotations

from pathlib import Path

import pytest

import server.config as config_module
from server.config import load_config


def test_bundled_resolves_to_the_folder_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "engram-reranker-v1"
    monkeypatch.setattr(config_module, "BUNDLED_RERANKER", folder)
    assert load_config(env={}).models.reranker == ""
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"x")
    assert load_config(env={}).models.reranker == str(folder)
    assert load_config(env={}, overrides={"models": {"reranker": ""}}).models.reranker == ""
    assert load_config(env={"ENGRAM_MODELS__RERANKER": "/elsewhere"}).models.reranker == "/elsewhere"
