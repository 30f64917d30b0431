"""One server per data directory: the second ``engram serve`` on a held directory stops before loading anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli import serve_command
from server.errors import ConfigError
from server.store.dirlock import LOCK_FILE, hold_data_dir


def test_second_holder_is_refused_and_named(tmp_path: Path) -> None:
    held = hold_data_dir(tmp_path / "data")
    try:
        with pytest.raises(ConfigError, match=f"in use by another engram server \\(pid {os.getpid()}\\)"):
            hold_data_dir(tmp_path / "data")
    finally:
        held.close()
    again = hold_data_dir(tmp_path / "data")   # released on close: the next server takes it
    again.close()
    assert (tmp_path / "data" / LOCK_FILE).read_text().strip() == str(os.getpid())


def test_serve_on_a_held_directory_exits_2_before_opening_it(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    held = hold_data_dir(tmp_path)
    try:
        rc = serve_command(["--data-dir", str(tmp_path), "--listen", "127.0.0.1:0"])
    finally:
        held.close()
    assert rc == 2
    assert "in use by another engram server" in capsys.readouterr().err
    assert not (tmp_path / "system").exists(), "a refused server opened the directory"


def test_lock_goes_with_a_killed_process(tmp_path: Path) -> None:
    code = ("import sys, time; from pathlib import Path; from server.store.dirlock import hold_data_dir; "
            "f = hold_data_dir(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[3])
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"pid {proc.pid}"):
            hold_data_dir(tmp_path)
    finally:
        proc.kill()
        proc.wait()
    hold_data_dir(tmp_path).close()   # SIGKILL left no stale lock
