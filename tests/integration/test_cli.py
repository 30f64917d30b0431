"""The ``engram`` CLI end to end against the real in-process server (the README quick start)."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest
from support import ADMIN_KEY

from engram_cli import main
from server.config import ServerConfig, advanced_fields
from engram_client import EngramClient
from engram_client._core import rpc_names

NOTES = [
    {"content": "Alice is allergic to peanuts", "type": "semantic", "importance": 0.9, "entities": ["alice"]},
    {"content": "Alice moved to Lisbon in March", "type": "episodic", "source_ref": "chat-12"},
    "Alice prefers short answers with bullet points",
    {"content": "To deploy, run make release then tag the commit", "type": "procedural"},
]


def run(capsys: pytest.CaptureFixture[str], server, *argv: str, key: str = ADMIN_KEY) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv, "--address", server.address, "--key", key])
    out, err = capsys.readouterr()
    return code, out, err


def test_quick_start(server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, server, "tenant", "create", "acme/alice")[:2] == (0, "created tenant acme/alice\n")
    code, out, _ = run(capsys, server, "key", "create", "alice-agent", "--tenant", "acme/alice")
    secret = out.split("secret: ")[1].split()[0]
    key_id = out.split("key_id: ")[1].split()[0]

    notes = tmp_path / "notes.jsonl"
    notes.write_text("\n".join(json.dumps(n) for n in NOTES) + "\n")
    code, out, err = run(capsys, server, "import", "acme/alice", str(notes), "--batch-size", "3", "--progress",
                         key=secret)
    assert code == 0 and "imported 4 records into acme/alice: 4 created" in out
    assert "importing notes.jsonl [" in err and "4/4 100%" in err and "created 4" in err

    csv_file = tmp_path / "more.csv"
    csv_file.write_text("content,type,importance,entities,pinned\n"
                        "Alice's cat is called Miso,semantic,0.6,alice|miso,true\n"
                        "\"Alice booked flights to Porto, 12 May\",episodic,,,false\n")
    code, out, _ = run(capsys, server, "import", "acme/alice", str(csv_file), key=secret)
    assert code == 0 and "imported 2 records" in out

    code, out, _ = run(capsys, server, "search", "acme/alice", "what is alice allergic to", "-k", "3", key=secret)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["#", "final", "relev", "dense", "bm25", "rerank", "recency", "imp.w",
                                              "time", "sal.", "type", "age", "content"]
    assert "Alice is allergic to peanuts" in lines[2] and "semantic" in lines[2]
    assert "3 hits in" in out and "embed" in out

    exported = tmp_path / "export.jsonl"
    assert run(capsys, server, "export", "acme/alice", str(exported), key=secret)[0] == 0
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(records) == 6 and {r["status"] for r in records} == {"active"}
    cat = next(r for r in records if "Miso" in r["content"])
    assert cat["pinned"] is True and cat["entities"] == ["alice", "miso"] and isinstance(cat["created_at_ms"], int)

    run(capsys, server, "tenant", "create", "acme/copy")
    code, out, _ = run(capsys, server, "import", "acme/copy", str(exported))  # an export imports back
    assert code == 0 and "6 created" in out
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        copied = sorted((m.content, m.type, m.pinned) for m in engram.iter_memories("acme/copy"))
        original = sorted((m.content, m.type, m.pinned) for m in engram.iter_memories("acme/alice"))
    assert copied == original

    assert run(capsys, server, "key", "revoke", key_id)[:2] == (0, f"revoked key {key_id}\n")
    code, _, err = run(capsys, server, "search", "acme/alice", "peanuts", key=secret)
    assert code == 1 and err.startswith("engram: UNAUTHENTICATED")


def test_import_checks_every_line_before_writing(server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "tenant", "create", "t")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\n"also fine"\n{"content": "x", "importanse": 0.3}\n')
    code, _, err = run(capsys, server, "import", "t", str(bad))
    assert code == 2 and "bad.jsonl:3: unknown field(s) importanse" in err
    bad.write_text('{"content": "fine"}\n{"content": "x", "type": "emotional"}\n')
    code, _, err = run(capsys, server, "import", "t", str(bad))
    assert code == 2 and "bad.jsonl:2" in err and "unknown MemoryType 'emotional'" in err
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        assert list(engram.iter_memories("t")) == []


def test_write_search_audit_and_errors(server, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "tenant", "create", "w")
    code, out, _ = run(capsys, server, "write", "w", "The budget is 40k", "--slot", "budget", "--importance", "0.8")
    assert code == 0 and out.startswith("created: m")
    code, out, _ = run(capsys, server, "search", "w", "budget", "--json")
    assert json.loads(out)["hits"][0]["memory"]["key"] == "budget"
    code, _, err = run(capsys, server, "search", "nobody", "x")
    assert code == 1 and "NOT_FOUND" in err
    if "Audit" in rpc_names():
        code, out, _ = run(capsys, server, "audit", "w")
        assert code == 0 and " write " in out and " search " in out
    if "Stats" in rpc_names():
        code, out, _ = run(capsys, server, "stats")
        assert code == 0 and "loaded_tenants" in out
    if "DeleteTenant" in rpc_names():
        assert run(capsys, server, "tenant", "delete", "w")[0] == 2  # needs --yes
        assert run(capsys, server, "tenant", "delete", "w", "--yes")[:2] == (0, "deleted tenant w (1 memories)\n")
        assert "w" not in run(capsys, server, "tenant", "list")[1].split()


def test_config_prints_effective_toml(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--defaults"]) == 0
    defaults = tomllib.loads(capsys.readouterr().out)
    expected = json.loads(json.dumps(dataclasses.asdict(ServerConfig()), default=str))
    for dotted in advanced_fields():   # the server's own choices: printed only where set ([advanced])
        section, _, key = dotted.rpartition(".")
        del (expected[section] if section else expected)[key]
    assert defaults == expected
    monkeypatch.setenv("ENGRAM_SEARCH__RERANK_DEPTH", "7")
    monkeypatch.setenv("ENGRAM_ADVANCED__CANDIDATES", "30")
    monkeypatch.setenv("ENGRAM_KEY", "a-client-key")  # a client variable: the server config ignores it
    assert main(["config"]) == 0
    printed = tomllib.loads(capsys.readouterr().out)
    assert printed["search"]["rerank_depth"] == 7 and printed["advanced"] == {"candidates": 30}
    assert main(["config", "--markdown"]) == 0
    table = capsys.readouterr().out
    assert "| `search.rerank_depth` | `ENGRAM_SEARCH__RERANK_DEPTH` | `0` |" in table and "`search.candidates`" not in table
