"""MkDocs hooks (mkdocs.yml ``hooks:``): pages that are generated from the code when the site is built.

A page asks for a generated part with a marker line:

- ``<!-- engram:grpc-api -->``: the gRPC reference, from proto/engram/v1/*.proto (docs/gen/proto_md.py);
- ``<!-- engram:config-table -->``: every config option, from server/config.py, by the same function that
  ``engram config --markdown`` prints (server.config_doc.to_markdown).
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


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
