"""engram import on real-world exports: mojibake is normalised (and recorded), a record that cannot be text
is reported by its file line, --skip-invalid imports the rest and writes the rejects beside the input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ADMIN_KEY

from engram_cli import main
from engram_client.cli.io import rejects_path
from engram_client import EngramClient


def run(capsys: pytest.CaptureFixture[str], server, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    code = main([*argv, "--address", server.address, "--key", ADMIN_KEY])
    out, err = capsys.readouterr()
    return code, out, err


def _lines(*contents: str) -> str:
    return "".join(json.dumps({"content": c}) + "\n" for c in contents)


def test_mojibake_record_imports_normalised(server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "tenant", "create", "t")
    f = tmp_path / "export.jsonl"
    f.write_text(_lines("one", "two \x96 dash", "three\u200b", "Cafe\u0301", "five", "six"))
    code, out, _ = run(capsys, server, "import", "t", str(f))
    assert code == 0 and "imported 6 records into t: 6 created" in out
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        got = {m.content: m.normalized for m in engram.iter_memories("t")}
    assert got["two \u2013 dash"] == "replaced C1 1 (U+0096)"
    assert got["three"] == "dropped zero-width/format 1" and got["Café"] == "NFC" and got["one"] == ""


def test_reject_names_the_file_line_and_skip_invalid_writes_rejects(server, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "tenant", "create", "t")
    f = tmp_path / "export.jsonl"
    f.write_text(_lines("one", "two", "three") + "\n" + _lines("\x00\x01\x02\x03bin", "five", "six"))
    code, out, err = run(capsys, server, "import", "t", str(f))
    assert code == 2 and "export.jsonl:5: content is not text" in err
    assert "3 record(s) of export.jsonl were imported into t (file lines 1-3); line 5 and everything after" in err
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        assert sorted(m.content for m in engram.iter_memories("t")) == ["one", "three", "two"]
    run(capsys, server, "tenant", "create", "u")
    f.write_text(_lines("one", "two") + '{"content": "x", "importanse": 1}\n' + _lines("\x00\x01\x02bin", "five"))
    code, out, _ = run(capsys, server, "import", "u", str(f), "--skip-invalid", "--batch-size", "2")
    assert code == 0 and "imported 3 of 5 records into u: 3 created, 2 rejected" in out
    assert f"2 rejected (file lines 3, 4): written to {rejects_path(f)}" in out
    rejects = [json.loads(line) for line in rejects_path(f).read_text().splitlines()]
    assert [(r["line"], r["error"][:24]) for r in rejects] == [(3, "unknown field(s) importa"),
                                                               (4, "content is not text: 50%")]
    assert json.loads(rejects[1]["record"]) == {"content": "\x00\x01\x02bin"}
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        assert sorted(m.content for m in engram.iter_memories("u")) == ["five", "one", "two"]
