"""Every config option is documented where it is declared, and the README's table is the one the dataclasses
generate."""

from __future__ import annotations

from pathlib import Path

from server.config import ServerConfig
from server.config_doc import to_markdown, undocumented

README = Path(__file__).resolve().parents[3] / "README.md"


def test_every_option_has_a_meaning() -> None:
    assert undocumented(ServerConfig()) == [], (
        "declare the option with server.config.option(default, doc)")


def test_readme_table_is_current() -> None:
    missing = [line for line in to_markdown(ServerConfig()).splitlines() if line not in README.read_text()]
    assert not missing, f"regenerate the README table with `engram config --markdown`; stale rows: {missing[:3]}"
