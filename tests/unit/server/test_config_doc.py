"""Every config option is documented where it is declared, and the docs' option table is the one the dataclasses
generate (docs/reference/configuration.md asks docs/gen/hooks.py for it when the site is built)."""

from __future__ import annotations

import sys
from pathlib import Path

from server.config import ServerConfig
from server.config_doc import to_markdown, undocumented

ROOT = Path(__file__).resolve().parents[3]
CONFIG_PAGE = ROOT / "docs" / "reference" / "configuration.md"


def test_every_option_has_a_meaning() -> None:
    assert undocumented(ServerConfig()) == [], (
        "declare the option with server.config.option(default, doc)")


def test_docs_table_is_generated() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "gen"))
    try:
        import hooks
    finally:
        sys.path.remove(str(ROOT / "docs" / "gen"))
    page = hooks.on_page_markdown(CONFIG_PAGE.read_text(), page=None)
    names = [line.split("`")[1] for line in to_markdown(ServerConfig()).splitlines()[2:]]
    missing = [name for name in names if f"| `{name}` |" not in page]
    assert names and not missing, f"the configuration page lacks options: {missing[:3]}"


def test_the_advanced_table_of_the_removed_options_page_is_current() -> None:
    page = (ROOT / "docs" / "reference" / "options-removed.md").read_text()
    missing = [line for line in to_markdown(ServerConfig(), advanced=True).splitlines() if line not in page]
    assert not missing, (f"regenerate the table of docs/reference/options-removed.md with `engram config --markdown "
                         f"--advanced`; stale rows: {missing[:3]}")
