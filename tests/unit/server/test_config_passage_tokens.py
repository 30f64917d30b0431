"""advanced.passage_tokens: the width of a long memory's passage windows, from the config to the embedder the
server loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.app import load_embedder
from server.config import load_config
from server.errors import ConfigError
from models.testing import build_tiny_encoder


def test_passage_tokens_is_set_by_its_advanced_name_and_reaches_the_embedder(tmp_path: Path) -> None:
    assert load_config(env={}).models.passage_tokens == 0   # the model's window: narrow windows cost SciFact
    config = load_config(env={"ENGRAM_ADVANCED__PASSAGE_TOKENS": "96"},
                         overrides={"models": {"embedder": str(build_tiny_encoder(tmp_path / "tiny"))}})
    assert config.models.passage_tokens == 96
    assert load_embedder(config, "cpu", speed={}).passage_tokens == 96   # type: ignore[attr-defined]
    assert load_config(env={}, overrides={"advanced": {"passage_tokens": 48}}).models.passage_tokens == 48


@pytest.mark.parametrize("tokens", [-1, 4])
def test_a_window_too_narrow_to_hold_text_is_refused(tokens: int) -> None:
    with pytest.raises(ConfigError, match="passage_tokens"):
        load_config(env={}, overrides={"advanced": {"passage_tokens": tokens}})
