"""The hygiene features as the SDK and the CLI show them: recall gated by default, salience in the memory
and the search table, consolidate from the SDK and the CLI."""

from __future__ import annotations

import pytest
from support import ADMIN_KEY

from engram_cli import main
from engram_client import EngramClient

DAY_MS = 86_400_000
REPEATS = ["Caroline: Walked Max on Carcavelos beach this morning",       # e5 cosine ~0.97 to each other: not
           "Caroline: Max had a great time on Carcavelos beach",          # near-duplicates (0.985), but one
           "Caroline: Max and I spent the afternoon on Carcavelos beach"]  # thing said three times


def run(capsys: pytest.CaptureFixture[str], server, *argv: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    code = main([*argv, "--address", server.address, "--key", ADMIN_KEY])
    return code, capsys.readouterr().out


def test_sdk_and_cli(server, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    with EngramClient(server.address, key=ADMIN_KEY) as engram:
        engram.create_tenant("h")
        engram.write("h", [{"content": t, "type": "episodic", "created_at_ms": 1_700_000_000_000 + i * 3 * DAY_MS}
                           for i, t in enumerate(REPEATS)])
        small = engram.recall("h", "thanks, bye!")
        assert small.skipped == "small talk" and not small and small.context == ""
        assert engram.recall("h", "thanks, bye!", gate=False).hits          # asked to search anyway
        recalled = engram.recall("h", "where does Max go?")
        assert recalled.skipped == "" and recalled.hits[0].memory.salience > 0
        assert [h.breakdown.salience for h in recalled.hits] == [h.memory.salience for h in recalled.hits]
        dry = engram.consolidate("h", dry_run=True)
        assert dry.clusters == 1 and dry.consolidated == 3
    code, out = run(capsys, server, "search", "h", "thanks, bye!", "--gate")
    assert code == 0 and out.strip() == "(no search: small talk)"
    code, out = run(capsys, server, "consolidate", "h")
    assert code == 0 and out.startswith("1 clusters: consolidated 3 episodic memories")
    code, out = run(capsys, server, "search", "h", "where does Max go?", "-k", "2")
    assert code == 0 and " sal. " in out.splitlines()[0] and "semantic" in out.splitlines()[2]
    code, out = run(capsys, server, "write", "h", "I moved to Lisbon in March 2023")
    assert code == 0 and out.startswith("created: m_") and "(salience 0." in out


def test_min_salience_setting_from_sdk_and_cli(server, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    with EngramClient(server.address, key=ADMIN_KEY) as admin:
        admin.create_tenant("s")
        key = admin.create_key("s-only", tenant_ids=["s"]).secret
    with EngramClient(server.address, key=key) as engram:     # the tenant's own key may set it
        assert not engram.get_settings("s").settings.HasField("min_salience")
        reply = engram.update_settings("s", min_salience=0.05)
        assert abs(reply.effective.min_salience - 0.05) < 1e-6
        written = engram.write("s", ["Caroline: Thanks!", "Caroline: I moved to Lisbon in March 2023"])
        assert written.skipped == 1 and written.results[0].memory_id == "" and written.results[1].memory_id
    code, out = run(capsys, server, "settings", "s")
    assert code == 0 and out == "min_salience: 0.05 (set for s)\n"
    code, out = run(capsys, server, "write", "s", "Bye!", "--type", "episodic")
    assert code == 0 and out.startswith("skipped: (not stored: salience below")
    code, out = run(capsys, server, "settings", "s", "--reset", "min_salience")
    assert code == 0 and out == "min_salience: 0 (server default: memory.min_salience)\n"
    code, out = run(capsys, server, "write", "s", "Bye!", "--type", "episodic")
    assert code == 0 and out.startswith("created: m_")
    assert run(capsys, server, "settings", "s", "--min-salience", "2")[0] == 1     # INVALID_ARGUMENT
    assert run(capsys, server, "settings", "s")[1] == "min_salience: 0 (server default: memory.min_salience)\n"
