"""The config, written out: effective values as TOML (``engram config``) and the README's option table
(``engram config --markdown``), both generated from the dataclasses in ``server/config.py`` and the one
description each option carries there (``option(default, doc)``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from server.config import ServerConfig


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


def _rows(config: ServerConfig) -> list[tuple[str, str, str, Any, str]]:
    """(section, option, env var, value, comment), top-level options first."""
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
    return "\n".join(lines) + "\n"


def undocumented(config: ServerConfig) -> list[str]:
    return [f"{section}.{name}" if section else name for section, name, _e, _v, note in _rows(config) if not note]


def to_markdown(config: ServerConfig) -> str:
    lines = ["| option | environment variable | default | meaning |", "| --- | --- | --- | --- |"]
    for section, name, env, value, note in _rows(config):
        option = f"{section}.{name}" if section else name
        shown, meaning = (text.replace("|", "\\|") for text in (_toml_value(value), note))
        lines.append(f"| `{option}` | `{env}` | `{shown}` | {meaning} |")
    return "\n".join(lines) + "\n"
