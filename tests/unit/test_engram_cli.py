"""The ``engram`` command's split: the client's script runs ``serve`` and ``config`` through the ``engram.commands``
entry points of engram-server, passing their flags on, and says which package to install when they are absent."""

from __future__ import annotations

import pytest

import engram_cli
from engram_cli import main


def test_serve_flags_reach_the_server_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["serve", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: engram serve") and "--data-dir" in out and "--console-listen" in out


def test_the_global_log_level_and_the_flags_are_passed_on_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(engram_cli, "server_command", lambda name: lambda argv: seen.append([name, *argv]) or 7)
    assert main(["--log-level", "DEBUG", "serve", "--listen", "127.0.0.1:1", "--data-dir=/tmp/d", "--ray"]) == 7
    assert main(["config", "--defaults"]) == 7
    assert seen == [["serve", "--log-level", "DEBUG", "--listen", "127.0.0.1:1", "--data-dir=/tmp/d", "--ray"],
                    ["config", "--defaults"]]


def test_without_engram_server_the_command_names_the_package(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(engram_cli.importlib.metadata, "entry_points", lambda **_: [])
    assert engram_cli.server_command("serve") is None
    assert main(["serve", "--listen", "127.0.0.1:1"]) == 2
    assert "engram serve needs the engram-server package (pip install engram-server" in capsys.readouterr().err


def test_the_installed_entry_points_are_the_server_commands() -> None:
    from server.cli import config_command, serve_command

    assert engram_cli.server_command("serve") is serve_command
    assert engram_cli.server_command("config") is config_command
    assert engram_cli.server_command("search") is None


def test_a_client_command_still_rejects_unknown_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["search", "t", "q", "--listen", "x"])
    assert done.value.code == 2 and "unrecognized arguments: --listen x" in capsys.readouterr().err


def test_a_config_the_server_refuses_is_exit_code_2(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_option = 1\n")
    assert main(["config", "--config", str(bad)]) == 2
    assert capsys.readouterr().err == "engram: unknown config option: no_such_option\n"
