"""The documented agent examples (examples/*.py) run as written against a real server: offline, the answer
stubbed, every engram call real; and docs/integrations/ shows each file as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ADMIN_KEY, start_server

from engram_client import EngramClient

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("mcp_agent.py", "langchain_agent.py", "llamaindex_agent.py")


@pytest.fixture(scope="module")
def engram(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder: Any) -> Iterator[dict[str, Any]]:
    running = start_server(tmp_path_factory.mktemp("examples") / "data", embedder=embedder)
    with EngramClient(running.address, key=ADMIN_KEY) as admin:
        admin.create_tenant("acme/alice")
        yield {"address": running.address, "admin": admin,
               "key": admin.create_key("alice-agent", tenant_ids=["acme/alice"]).secret}
    running.stop()


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs_against_the_server(example: str, engram: dict[str, Any]) -> None:
    admin = engram["admin"]
    admin.forget("acme/alice", all=True, delete=True, include_pinned=True)  # each example starts afresh
    admin.write("acme/alice", ["Alice's cat is called Miso"])
    before = {m.memory_id for m in admin.iter_memories("acme/alice")}
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "ENGRAM_KEY": engram["key"],
           "ENGRAM_ADDRESS": engram["address"]}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / example)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Can you suggest a snack for my flight?" in out.stdout
    assert "allergic to peanuts" in out.stdout.split("Can you suggest a snack for my flight?", 1)[1]  # recalled
    written = [m for m in admin.iter_memories("acme/alice") if m.memory_id not in before]
    assert written and [m for m in written if "peanuts" in m.content]


def test_docs_show_the_examples_as_they_are() -> None:
    pages = "\n".join(page.read_text() for page in sorted((ROOT / "docs" / "integrations").glob("*.md")))
    for example in EXAMPLES:
        body = (ROOT / "examples" / example).read_text().split('"""\n\n', 1)[1]  # the code after the docstring
        assert body.strip() in pages, f"docs/integrations' copy of examples/{example} differs from the file"
