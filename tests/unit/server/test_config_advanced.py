"""The [advanced] table: what the server decides itself is out of the option table, still settable by its advanced
name (TOML or ENGRAM_ADVANCED__NAME), and its former name (TOML or ENGRAM_SECTION__OPTION) still takes effect with a
warning (server/config_migrate.py ADVANCED, docs/reference/options-removed.md)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from server.config import ServerConfig, advanced_fields, has_option, load_config
from server.config_doc import to_markdown, to_toml
from server.config_migrate import ADVANCED
from server.errors import ConfigError

MAX_OPTIONS = 45


def _default(dotted: str) -> Any:
    value: Any = ServerConfig()
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _other(name: str, default: Any) -> Any:
    """A valid value other than the default."""
    special = {"rerank_dtype": "float32", "calibration": "custom-calibration.json", "dedupe_cosine": 0.9,
               "passage_tokens": 48}
    if name in special:
        return special[name]
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        return default + 1
    return f"{default}-other"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, (int, float)) else f'"{value}"'


def _env(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def test_the_option_table_is_short_and_holds_no_advanced_option() -> None:
    table = to_markdown(ServerConfig())
    rows = table.splitlines()[2:]
    assert len(rows) <= MAX_OPTIONS, f"{len(rows)} operator options; the server should decide more of them itself"
    assert len(ADVANCED) == len(set(ADVANCED.values()))
    assert all(has_option(dotted) for dotted in ADVANCED.values()), "every advanced name sets an existing option"
    for dotted in advanced_fields():
        assert f"| `{dotted}` |" not in table
    advanced = to_markdown(ServerConfig(), advanced=True).splitlines()[2:]
    assert len(advanced) == len(ADVANCED) and all("(was `" in row for row in advanced)


@pytest.mark.parametrize("name", sorted(ADVANCED))
def test_an_old_name_still_takes_effect_with_a_warning_and_the_advanced_name_without(
        name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dotted = ADVANCED[name]
    section, _, key = dotted.rpartition(".")
    value = _other(name, _default(dotted))
    old_toml = tmp_path / "old.toml"
    old_toml.write_text((f"[{section}]\n" if section else "") + f"{key} = {_toml(value)}\n")
    new_toml = tmp_path / "new.toml"
    new_toml.write_text(f"[advanced]\n{name} = {_toml(value)}\n")
    old_env = f"ENGRAM_{section.upper()}__{key.upper()}" if section else f"ENGRAM_{key.upper()}"
    with caplog.at_level(logging.WARNING, logger="server.config"):
        configs = [load_config(env={}, toml_path=old_toml), load_config(env={old_env: _env(value)})]
    warned = [r.getMessage() for r in caplog.records if f"option {dotted} is now advanced.{name}" in r.getMessage()]
    assert len(warned) == 2, caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="server.config"):
        configs += [load_config(env={}, toml_path=new_toml),
                    load_config(env={f"ENGRAM_ADVANCED__{name.upper()}": _env(value)})]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    got = {_place(cfg, dotted) for cfg in configs}
    assert got == {value}, got
    assert all(cfg == configs[0] for cfg in configs)


def _place(cfg: ServerConfig, dotted: str) -> Any:
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def test_the_advanced_value_wins_over_the_old_name_and_unknown_advanced_names_fail() -> None:
    cfg = load_config(env={"ENGRAM_MODELS__CPU_THREADS": "3", "ENGRAM_ADVANCED__CPU_THREADS": "2"})
    assert cfg.models.cpu_threads == 2
    with pytest.raises(ConfigError, match="unknown config option: advanced.cpu_threadz"):
        load_config(env={"ENGRAM_ADVANCED__CPU_THREADZ": "2"})
    with pytest.raises(ConfigError, match="advanced.cpu_threads must be >= 0"):
        load_config(env={"ENGRAM_ADVANCED__CPU_THREADS": "-1"})
    with pytest.raises(ConfigError, match="needs a table"):
        load_config(env={}, overrides={"advanced": 3})


def test_engram_config_prints_the_advanced_options_only_where_set_and_reads_back(tmp_path: Path) -> None:
    import tomllib

    assert "[advanced]" not in to_toml(ServerConfig())
    cfg = load_config(env={"ENGRAM_ADVANCED__SPLIT_ABOVE": "0", "ENGRAM_SEARCH__RERANK_DEPTH": "7"})
    text = to_toml(cfg)
    parsed = tomllib.loads(text)
    assert parsed["advanced"] == {"split_above": 0} and parsed["search"]["rerank_depth"] == 7
    assert "split_above" not in parsed["batching"]
    path = tmp_path / "engram.toml"
    path.write_text(text)
    assert load_config(env={}, toml_path=path) == cfg
