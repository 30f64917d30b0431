"""A data directory keeps the embedder its vectors came from (server.app.guard_vector_space)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from server.app import PREVIOUS_DEFAULT_EMBEDDER, guard_vector_space
from server.errors import ConfigError


@dataclass
class Named:   # the two attributes of models.base.Embedder the guard reads
    name: str
    dim: int = 384


def test_first_start_records_the_embedder_and_a_restart_with_it_passes(tmp_path) -> None:
    guard_vector_space(tmp_path, Named("multilingual-e5-small"))
    assert json.loads((tmp_path / "system" / "embedder.json").read_text()) == {"name": "multilingual-e5-small",
                                                                              "dim": 384}
    guard_vector_space(tmp_path, Named("multilingual-e5-small"))


def test_another_embedder_is_refused_with_what_to_do(tmp_path) -> None:
    guard_vector_space(tmp_path, Named("multilingual-e5-small"))
    with pytest.raises(ConfigError, match="models.embedder"):
        guard_vector_space(tmp_path, Named(PREVIOUS_DEFAULT_EMBEDDER))


def test_a_data_dir_from_before_the_record_is_taken_as_the_old_default(tmp_path) -> None:
    (tmp_path / "acme").mkdir()          # a tenant written before embedders were recorded
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2"):
        guard_vector_space(tmp_path, Named("multilingual-e5-small"))
    guard_vector_space(tmp_path, Named(PREVIOUS_DEFAULT_EMBEDDER))
    assert json.loads((tmp_path / "system" / "embedder.json").read_text())["name"] == PREVIOUS_DEFAULT_EMBEDDER
