"""The config, written out: effective values as TOML (``engram config``) and the README's option table
(``engram config --markdown``), both generated from the dataclasses in ``server/config.py``."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path
from typing import Any

from server.config import ServerConfig

_COMMENT = re.compile(r"^\s+(\w+)\s*:[^=]+=.*?#\s*(.+)$")


def _comments(cls: type) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in inspect.getsource(cls).splitlines():
        match = _COMMENT.match(line)
        if match:
            out[match.group(1)] = match.group(2).strip()
    return out


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
    notes = _comments(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            sections.append((f.name, value))
        else:
            rows.append(("", f.name, f"ENGRAM_{f.name.upper()}", value, notes.get(f.name, "")))
    for section, cfg in sections:
        notes = _comments(type(cfg))
        for f in dataclasses.fields(cfg):
            rows.append((section, f.name, f"ENGRAM_{section.upper()}__{f.name.upper()}", getattr(cfg, f.name),
                         notes.get(f.name, "")))
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


def to_markdown(config: ServerConfig) -> str:
    lines = ["| option | environment variable | default | meaning |", "| --- | --- | --- | --- |"]
    for section, name, env, value, note in _rows(config):
        option = f"{section}.{name}" if section else name
        shown, meaning = (text.replace("|", "\\|") for text in (_toml_value(value), note))
        lines.append(f"| `{option}` | `{env}` | `{shown}` | {meaning} |")
    return "\n".join(lines) + "\n"
