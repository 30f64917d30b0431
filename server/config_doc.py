"""The config, written out: effective values as TOML (``engram config``), the README's option table
(``engram config --markdown``) and the ``[advanced]`` table of docs/reference/options-removed.md (``engram config
--markdown --advanced``), all generated from the dataclasses in ``server/config.py`` and the one description each
option carries there (``option(default, doc)``). The option table holds what an operator sets; the advanced options
(server/config_migrate.py ADVANCED) are what the server decides itself."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from server.config import ServerConfig, advanced_fields
from server.config_migrate import ADVANCED


def _doc(f: dataclasses.Field[Any]) -> str:
    """An option's one description, written where it is declared (``server.config.option``)."""
    return str(f.metadata.get("doc", ""))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value, ensure_ascii=False)


def _all_rows(config: ServerConfig) -> list[tuple[str, str, str, Any, str]]:
    """(section, option, env var, value, comment) of every field, top-level options first."""
    rows: list[tuple[str, str, str, Any, str]] = []
    sections = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            sections.append((f.name, value))
        else:
            rows.append(("", f.name, f"ENGRAM_{f.name.upper()}", value, _doc(f)))
    for section, cfg in sections:
        for f in dataclasses.fields(cfg):
            rows.append((section, f.name, f"ENGRAM_{section.upper()}__{f.name.upper()}", getattr(cfg, f.name), _doc(f)))
    return rows


def _dotted(section: str, name: str) -> str:
    return f"{section}.{name}" if section else name


def _rows(config: ServerConfig) -> list[tuple[str, str, str, Any, str]]:
    """The option table's rows: every option an operator sets (the advanced ones left out)."""
    advanced = advanced_fields()
    return [row for row in _all_rows(config) if _dotted(row[0], row[1]) not in advanced]


def _advanced_rows(config: ServerConfig) -> list[tuple[str, str, str, Any, str]]:
    """("advanced", advanced name, env var, value, comment) in ADVANCED's order; the comment names the former option."""
    by_place = {_dotted(row[0], row[1]): row for row in _all_rows(config)}
    return [("advanced", name, f"ENGRAM_ADVANCED__{name.upper()}", by_place[dotted][3],
             f"(was `{dotted}`) {by_place[dotted][4]}") for name, dotted in ADVANCED.items() if dotted in by_place]


def to_toml(config: ServerConfig, *, redact: bool = True) -> str:
    lines = ["# engram configuration: defaults ← this file (ENGRAM_CONFIG or --config) ← ENGRAM_* variables"]
    current = ""
    for section, name, _env, value, note in _rows(config):
        if section != current:
            lines.append(f"\n[{section}]")
            current = section
        if redact and name == "admin_key" and value:
            value = "<redacted>"
        comment = f"  # {note}" if note else ""
        lines.append(f"{name} = {_toml_value(value)}{comment}")
    defaults = {row[1]: row[3] for row in _advanced_rows(ServerConfig())}
    changed = [(name, value) for _s, name, _e, value, _n in _advanced_rows(config) if value != defaults[name]]
    if changed:   # advanced options only where they differ from the server's own choice
        lines.append("\n[advanced]  # docs/reference/options-removed.md")
        lines += [f"{name} = {_toml_value(value)}" for name, value in changed]
    return "\n".join(lines) + "\n"


def undocumented(config: ServerConfig) -> list[str]:
    return [_dotted(section, name) for section, name, _e, _v, note in _all_rows(config) if not note]


def to_markdown(config: ServerConfig, *, advanced: bool = False) -> str:
    """The option table, or (``advanced``) the ``[advanced]`` table."""
    lines = ["| option | environment variable | default | meaning |", "| --- | --- | --- | --- |"]
    for section, name, env, value, note in (_advanced_rows if advanced else _rows)(config):
        option = f"{section}.{name}" if section else name
        shown, meaning = (text.replace("|", "\\|") for text in (_toml_value(value), note))
        lines.append(f"| `{option}` | `{env}` | `{shown}` | {meaning} |")
    return "\n".join(lines) + "\n"
