"""The TypeScript client (clients/typescript, npm package engram-grpc) against the real server: its node test suite,
its generated code, and its npm tarball installed into a fresh Node project."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support import ADMIN_KEY

REPO = Path(__file__).resolve().parents[2]
TS_DIR = REPO / "clients" / "typescript"
NPM_FLAGS = ["--ignore-scripts", "--no-audit", "--no-fund"]


def _npm() -> str:
    """npm, with the package's pinned dependencies installed (``npm ci`` when node_modules is missing or older
    than package-lock.json; make test does it first)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    npm = shutil.which("npm")
    assert npm is not None
    installed = TS_DIR / "node_modules" / ".package-lock.json"
    if not installed.is_file() or installed.stat().st_mtime < (TS_DIR / "package-lock.json").stat().st_mtime:
        done = subprocess.run([npm, "ci", *NPM_FLAGS], cwd=TS_DIR, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"npm ci failed: {done.stderr[-2000:]}"
    return npm


def _tap_summary(path: Path) -> dict[str, int]:
    """The node test runner's closing counts (``# tests 25``, ``# pass 25``, ...) from its TAP report."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$",
                                                  path.read_text(), re.MULTILINE)}


def test_typescript_client_suite_passes_against_the_server(server) -> None:
    npm = _npm()
    report = TS_DIR / "build" / "node-test.tap"
    report.unlink(missing_ok=True)
    env = {**os.environ, "ENGRAM_TEST_ADDRESS": server.address, "ENGRAM_TEST_ADMIN_KEY": ADMIN_KEY}
    done = subprocess.run([npm, "test"], cwd=TS_DIR, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    counts = _tap_summary(report)
    assert counts["tests"] >= 25 and counts["pass"] == counts["tests"], counts
    assert counts["fail"] == counts["skipped"] == counts["cancelled"] == counts["todo"] == 0, counts
    tap = report.read_text()
    for name in ("a write whose answer was lost is retried with the same idempotency key: one memory",
                 "get, list, history, confirm, delete and forget",
                 "a wrong key is Unauthenticated, a key for another tenant PermissionDenied, no retries",
                 "the example agent remembers a fact and answers from it on a later turn"):
        assert re.search(rf"^\s*ok \d+ - {re.escape(name)}$", tap, re.MULTILINE), name


def test_generated_typescript_is_what_the_proto_gives(tmp_path: Path) -> None:
    """src/gen is committed: regenerating it from proto/ with the pinned ts-proto must give the same files
    (else run ``npm run generate`` in clients/typescript after changing the proto)."""
    _npm()
    done = subprocess.run(["sh", "scripts/generate.sh", str(tmp_path)], cwd=TS_DIR,
                          env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    committed = TS_DIR / "src" / "gen"
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.ts"))
    assert fresh == sorted(p.relative_to(committed) for p in committed.rglob("*.ts"))
    stale = [str(p) for p in fresh if (tmp_path / p).read_bytes() != (committed / p).read_bytes()]
    assert not stale, f"{stale} differ from proto/: run `npm run generate` in clients/typescript"


def test_npm_pack_tarball_installs_into_a_new_project_and_works(server, tmp_path: Path) -> None:
    npm = _npm()
    done = subprocess.run([npm, "pack", "--json", "--pack-destination", str(tmp_path)], cwd=TS_DIR,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    tarball = tmp_path / json.loads(done.stdout)[0]["filename"]
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    assert {"package/package.json", "package/README.md", "package/dist/index.js", "package/dist/index.d.ts",
            "package/dist/gen/engram/v1/service.js"} <= names
    assert not [n for n in names if n.startswith(("package/src/", "package/test/", "package/node_modules/"))]

    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app", "version": "1.0.0", "private": True}))
    done = subprocess.run([npm, "install", str(tarball), "--prefer-offline", *NPM_FLAGS], cwd=app,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # An ES module importing the CommonJS package by name, as an application would.
    (app / "smoke.mjs").write_text("""
import { EngramClient, NotFoundError, WriteOutcome } from "engram-grpc";
const [address, key] = process.argv.slice(2);
const engram = new EngramClient(address, { key });
await engram.createTenant("npm/smoke");
const written = await engram.write("npm/smoke", ["The user prefers window seats", "The user's cat is called Miso"]);
const result = await engram.search("npm/smoke", "where does the user like to sit on a plane", { topK: 1 });
let missing = "";
try { await engram.history("npm/smoke", "no-such-memory"); } catch (e) { missing = e instanceof NotFoundError ? e.codeName : String(e); }
engram.close();
console.log(JSON.stringify({ created: written.results.every((r) => r.outcome === WriteOutcome.WRITE_OUTCOME_CREATED),
  top: result.hits[0].memory.content, dense_rank: result.hits[0].breakdown.denseRank, missing }));
""")
    done = subprocess.run(["node", "smoke.mjs", server.address, ADMIN_KEY], cwd=app, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"created": True, "top": "The user prefers window seats", "dense_rank": 1,
                                       "missing": "NOT_FOUND"}
    # The package's declarations type-check a TypeScript user's code (with the package's own pinned tsc).
    (app / "check.ts").write_text("""
import { EngramClient, type QueryResult, InvalidArgumentError } from "engram-grpc";
async function top(engram: EngramClient): Promise<string | undefined> {
  const result: QueryResult = await engram.search("t", "q", { topK: 3, filter: { types: ["semantic"] } });
  return result.hits[0]?.memory?.content;
}
const wrong: typeof InvalidArgumentError = InvalidArgumentError;
void top; void wrong;
""")
    tsc = TS_DIR / "node_modules" / ".bin" / "tsc"
    done = subprocess.run([str(tsc), "--noEmit", "--strict", "--module", "node16", "--moduleResolution", "node16",
                           "--target", "es2022", "--types", "node", "--typeRoots", str(TS_DIR / "node_modules" / "@types"),
                           "check.ts"], cwd=app, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
