"""engram import of a file is resumable: an import SIGKILLed midway and run again writes every record exactly once
(each Write's idempotency key comes from its records' file lines), and a rerun of a finished import adds nothing.
The import runs as its own process against the real server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import ADMIN_KEY

from engram_client import EngramClient

ROOT = Path(__file__).resolve().parents[2]
N = 480


def _command(server, path: Path, *extra: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [sys.executable, "-m", "engram_cli", "import", "resumed", str(path), "--address", server.address,
            "--key", ADMIN_KEY, "--batch-size", "8", "--window", "2", "--no-progress", *extra]


def _count(engram: EngramClient) -> int:
    return int(engram.stats("resumed").tenants[0].memories)


def test_an_import_killed_midway_and_run_again_writes_each_record_once(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "turns.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i in range(N):
            f.write(json.dumps({"content": f"note {i}: {'alpha beta gamma delta'.split()[i % 4]} of line {i}",
                                "type": "semantic"}) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        engram.create_tenant("resumed")
        first = subprocess.Popen(_command(server, path), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while _count(engram) < N // 3 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait()
        at_kill = _count(engram)
        assert first.returncode == -signal.SIGKILL and 0 < at_kill < N   # killed midway, not after the end
        again = subprocess.run(_command(server, path), cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=300, check=False)
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"imported {N} records into resumed: {N} created" in again.stdout
        contents = [m.content for m in engram.iter_memories("resumed", page_size=500)]
        assert len(contents) == N and len(set(contents)) == N == _count(engram)
        # a finished import run once more: every Write is answered from the server's record, nothing is added
        third = subprocess.run(_command(server, path), cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=300, check=False)
        assert third.returncode == 0 and _count(engram) == N


def test_the_same_lines_in_another_file_are_a_new_import(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = "".join(json.dumps({"content": f"fact number {i} about the garden"}) + "\n" for i in range(5))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(lines)
    b.write_text(lines)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        engram.create_tenant("resumed")
        for path in (a, b):
            done = subprocess.run(_command(server, path), cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=120, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
        # b's Writes are not answered from a's record: the server's near-duplicate rule merges them instead
        assert "5 merged" in done.stdout and _count(engram) == 5
