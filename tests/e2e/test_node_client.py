"""A non-Python client: the Node.js program in tests/e2e/node talks to the real server using only proto/."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import ADMIN_KEY

NODE_DIR = Path(__file__).resolve().parent / "node"


def _node_ready() -> str:
    """The node binary, with the client's pinned dependencies installed (``npm ci`` on first use)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed")
        try:
            done = subprocess.run([npm, "ci", "--prefix", str(NODE_DIR), "--ignore-scripts", "--no-audit",
                                   "--no-fund"], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip("npm ci timed out (is the npm registry reachable?)")
        if done.returncode != 0:
            pytest.skip(f"npm ci failed (is the npm registry reachable?): {done.stderr.strip()[-300:]}")
    return node


def test_node_client_writes_and_searches(server) -> None:
    node = _node_ready()
    done = subprocess.run([node, str(NODE_DIR / "client.js"), server.address, ADMIN_KEY, "node/tenant"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["outcomes"] == ["WRITE_OUTCOME_CREATED"] * 3
    top = seen["hits"][0]
    assert top["content"] == "The user is allergic to peanuts" and top["type"] == "MEMORY_TYPE_SEMANTIC"
    assert top["final"] > 0 and top["dense_rank"] == 1
    assert int(seen["total_ns"]) > 0
    assert seen["other_tenant"] == "PERMISSION_DENIED"


def test_node_client_reports_errors(server) -> None:
    node = _node_ready()
    done = subprocess.run([node, str(NODE_DIR / "client.js"), server.address, "wrong-key", "node/x"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "UNAUTHENTICATED" in done.stderr
