"""MkDocs hooks (mkdocs.yml ``hooks:``): pages that are generated from the code when the site is built.

A page asks for a generated part with a marker line:

- ``<!-- engram:grpc-api -->``: the gRPC reference, from proto/engram/v1/*.proto (docs/gen/proto_md.py);
- ``<!-- engram:config-table -->``: every config option, from server/config.py, by the same function that
  ``engram config --markdown`` prints (server.config_doc.to_markdown).

Pages that other parts of the project add (``OPTIONAL_PAGES``) join the nav when their file exists, so a
strict build neither fails on them nor leaves them out.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import proto_md  # noqa: E402


def _config_table() -> str:
    from server.config import ServerConfig
    from server.config_doc import to_markdown

    return proto_md.link_readme_sections(to_markdown(ServerConfig()))


GENERATED = {
    "<!-- engram:grpc-api -->": lambda: proto_md.render(proto_md.descriptor_set()),
    "<!-- engram:config-table -->": _config_table,
}


# nav section → (title, page) appended to it when docs/<page> exists
OPTIONAL_PAGES = {
    "Install": [("Packages", "install/packages.md")],
    "Concepts": [("Updates and contradictions", "concepts/updates.md")],
    "Operations": [("Tracing", "operations/tracing.md"), ("Importing data", "operations/import.md"),
                   ("Operating the cluster", "operations/cluster-operations.md")],
    "Integrations": [("TypeScript", "integrations/typescript.md")],
}


def on_config(config: Any, **_: Any) -> Any:
    docs = Path(config["docs_dir"])
    for entry in config["nav"] or []:
        if not isinstance(entry, dict) or len(entry) != 1:
            continue
        (section, pages), = entry.items()
        extra = [{title: page} for title, page in OPTIONAL_PAGES.get(section, []) if (docs / page).is_file()]
        if not extra:
            continue
        if isinstance(pages, str):   # a single page becomes the section's index page
            pages = [pages]
        listed = {str(v) for p in pages for v in (p.values() if isinstance(p, dict) else [p])}
        entry[section] = pages + [e for e in extra if next(iter(e.values())) not in listed]
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
