from __future__ import annotations

import logging
from pathlib import Path

import pytest

from server.config import REMOVED, RENAMED, load_config
from server.errors import ConfigError


def test_layers_toml_then_env_then_overrides(tmp_path: Path) -> None:
    toml = tmp_path / "engram.toml"
    toml.write_text('listen = "0.0.0.0:1"\n[search]\nrerank_depth = 3\ncandidates = 50\n')
    cfg = load_config(env={"ENGRAM_CONFIG": str(toml), "ENGRAM_SEARCH__RERANK_DEPTH": "7",
                           "ENGRAM_BATCHING__MAX_BATCH_REQUESTS": "8"}, overrides={"listen": "127.0.0.1:2"})
    assert cfg.listen == "127.0.0.1:2" and cfg.search.rerank_depth == 7 and cfg.search.candidates == 50
    assert cfg.batching.max_batch_requests == 8


@pytest.mark.parametrize("env", [
    {"ENGRAM_SEARCH__CANDIDATES": "0"},
    {"ENGRAM_SEARCH__NOPE": "1"},
    {"ENGRAM_BATCHING__ENABLED": "maybe"},
    {"ENGRAM_SCORING__EPISODIC_HALF_LIFE_S": "-1"},
    {"ENGRAM_A__B__C": "1"},
    {"ENGRAM_BATCHING__MAX_BATCH_REQUESTS": "0"},
    {"ENGRAM_MODELS__EMBED_MAX_LENGTH": "1"},
])
def test_bad_config_fails_at_startup(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        load_config(env=env)


def test_a_renamed_option_still_takes_effect_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """batching.enabled = false was batching off; it is max_batch_requests = 1 now, from a file or a variable."""
    assert RENAMED["batching.enabled"][0] == "batching.max_batch_requests"
    toml = tmp_path / "engram.toml"
    toml.write_text("[batching]\nenabled = false\nqueue_capacity = 8\n")
    with caplog.at_level(logging.WARNING, logger="server.config"):
        from_file = load_config(env={"ENGRAM_CONFIG": str(toml)})
        from_env = load_config(env={"ENGRAM_BATCHING__ENABLED": "off"})
        still_on = load_config(env={"ENGRAM_BATCHING__ENABLED": "true", "ENGRAM_BATCHING__MAX_BATCH_REQUESTS": "16"})
    assert (from_file.batching.max_batch_requests, from_file.batching.queue_capacity) == (1, 8)
    assert from_env.batching.max_batch_requests == 1
    assert still_on.batching.max_batch_requests == 16   # true keeps the new option's value
    warned = [r.getMessage() for r in caplog.records if "batching.enabled" in r.getMessage()]
    assert len(warned) == 3 and all("batching.max_batch_requests" in m for m in warned)


def test_generated_stubs_are_fresh() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    result = subprocess.run([sys.executable, str(root / "proto" / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_removed_option_is_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An internal knob that became a constant: a TOML file or an ENGRAM_* variable naming it still starts,
    with a warning that says the setting is ignored; the options beside it take effect."""
    removed = next(name for name in REMOVED if name.startswith("search."))
    option = removed.partition(".")[2]
    toml = tmp_path / "engram.toml"
    toml.write_text(f"[search]\n{option} = 3.0\ncandidates = 50\n")
    with caplog.at_level(logging.WARNING, logger="server.config"):
        from_file = load_config(env={"ENGRAM_CONFIG": str(toml)})
        from_env = load_config(env={f"ENGRAM_SEARCH__{option.upper()}": "3"})
    assert from_file.search.candidates == 50 and from_env == load_config(env={})
    warned = [r.getMessage() for r in caplog.records if removed in r.getMessage()]
    assert len(warned) == 2 and all("ignored" in m for m in warned)


def test_an_unknown_option_still_fails() -> None:
    with pytest.raises(ConfigError, match="unknown config option"):
        load_config(env={}, overrides={"search": {"rerank_wieght": 1.0}})


def test_the_knobs_that_became_constants_start_the_server_unchanged(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A file from the previous release naming internal knobs (a whole [index] section, fusion weights, the
    device slots): the server starts with its constants, one warning per option, the real options applied."""
    toml = tmp_path / "engram.toml"
    toml.write_text("[index]\nnprobe = 64\npromote_at = 0\n[search]\nrrf_k = 30.0\ndense_weight_cjk = 1.0\n"
                    "candidates = 40\n[batching]\ndevice_slots = 2\n")
    with caplog.at_level(logging.WARNING, logger="server.config"):
        cfg = load_config(env={"ENGRAM_CONFIG": str(toml), "ENGRAM_TENANTS__EVICT_IDLE_S": "0"})
    assert cfg == load_config(env={}, overrides={"search": {"candidates": 40}})
    warned = {name for name in REMOVED for r in caplog.records if f"option {name} " in r.getMessage()}
    assert warned == {"index.nprobe", "index.promote_at", "search.rrf_k", "search.dense_weight_cjk",
                      "batching.device_slots", "tenants.evict_idle_s"}
