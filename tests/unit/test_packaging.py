"""The two distributions' metadata: engram-server (pyproject.toml) and engram-grpc (clients/python/pyproject.toml).
The built wheels and sdists themselves are installed and run by ``make package-check`` (scripts/package_check.py)."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import engram_cli

ROOT = Path(__file__).resolve().parents[2]
SERVER_TOML = tomllib.loads((ROOT / "pyproject.toml").read_text())
CLIENT_TOML = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())
SERVER, CLIENT = SERVER_TOML["project"], CLIENT_TOML["project"]
CLIENT_PACKAGES = ("engram_client", "engram_proto", "engram_cli", "engram_integrations")


def _requirements(project: dict) -> dict[str, Requirement]:
    return {r.name: r for r in map(Requirement, project["dependencies"])}


def _pins(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+)", path.read_text(), re.M))


def _glob(path: str, pattern: str) -> bool:
    """setuptools' package-data glob: ``*`` stays within one folder."""
    parts, globs = path.split("/"), pattern.split("/")
    return len(parts) == len(globs) and all(fnmatch.fnmatch(p, g) for p, g in zip(parts, globs, strict=True))


def test_names_and_versions() -> None:
    assert (SERVER["name"], CLIENT["name"]) == ("engram-server", "engram-grpc")
    assert SERVER["version"] == CLIENT["version"]
    assert str(_requirements(SERVER)["engram-grpc"].specifier) == f"=={CLIENT['version']}"


def test_the_client_needs_grpcio_and_protobuf_only() -> None:
    assert sorted(_requirements(CLIENT)) == ["grpcio", "protobuf"]
    extras = {name: [Requirement(d) for d in deps] for name, deps in CLIENT["optional-dependencies"].items()}
    assert sorted(extras) == ["langchain", "llamaindex", "mcp"]
    tested = _pins(ROOT / "requirements-integrations.txt")  # each extra pins the version the tests install
    for deps in extras.values():
        assert [(r.name, str(r.specifier)) for r in deps] == [(r.name, f"=={tested[r.name]}") for r in deps]
    assert not {"mcp", "langchain", "llamaindex"} & set(SERVER["optional-dependencies"])


def test_the_stubs_accept_the_client_floor() -> None:
    """The generated stubs refuse a grpcio older than the grpcio-tools and a protobuf older than the protoc that
    made them: the client's lower bounds are those versions (regenerating with newer tools moves them)."""
    grpc_made = re.search(r"GRPC_GENERATED_VERSION = '(\S+)'",
                          (ROOT / "engram_proto/v1/service_pb2_grpc.py").read_text()).group(1)  # type: ignore[union-attr]
    protobuf_made = re.search(r"# Protobuf Python Version: (\S+)",
                              (ROOT / "engram_proto/v1/service_pb2.py").read_text()).group(1)  # type: ignore[union-attr]
    client = _requirements(CLIENT)
    assert f">={grpc_made}" in str(client["grpcio"].specifier).split(",")
    assert f">={protobuf_made}" in str(client["protobuf"].specifier).split(",")
    pinned = _pins(ROOT / "requirements.txt")
    assert client["grpcio"].specifier.contains(pinned["grpcio"])
    assert client["protobuf"].specifier.contains(pinned["protobuf"])


def test_one_distribution_installs_the_engram_script() -> None:
    assert CLIENT["scripts"] == {"engram": "engram_cli:main"}
    assert "scripts" not in SERVER and "gui-scripts" not in SERVER
    commands = SERVER["entry-points"][engram_cli.COMMANDS_GROUP]
    assert sorted(commands) == sorted(engram_cli.SERVER_COMMANDS)
    for target in commands.values():  # each resolves to a callable
        module, _, name = target.partition(":")
        assert callable(getattr(__import__(module, fromlist=[name]), name))


def test_the_client_links_point_at_the_packages() -> None:
    for package in CLIENT_PACKAGES:
        link = ROOT / "clients" / "python" / package
        assert link.is_symlink() and link.resolve() == ROOT / package
    found = CLIENT_TOML["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(found) == sorted(f"{p}*" for p in CLIENT_PACKAGES)
    assert not {p.rstrip("*") for p in SERVER_TOML["tool"]["setuptools"]["packages"]["find"]["include"]} & set(
        CLIENT_PACKAGES)


def test_package_data_covers_every_tracked_data_file() -> None:
    """A data file git tracks in the server's packages (weights, static files, tables) reaches the wheel."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "server", "models", "kernels"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    data = SERVER_TOML["tool"]["setuptools"]["package-data"]
    missing = []
    for path in (p for p in listed if not p.endswith(".py")):
        parts = Path(path).parts
        packages = [(".".join(parts[:i]), "/".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
        if not any(_glob(rest, pattern) for package, rest in packages for pattern in data.get(package, ())):
            missing.append(path)
    assert missing == []
    assert "model.safetensors" in {Path(p).name for p in listed if p.startswith("models/weights/engram-reranker-v1/")}
