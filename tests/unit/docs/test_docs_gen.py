"""The docs site's generators (docs/gen/): the gRPC reference covers the whole proto with each RPC's status codes,
and the dead-link check finds a missing page and a missing anchor in built HTML."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

GEN = Path(__file__).resolve().parents[3] / "docs" / "gen"
sys.path.insert(0, str(GEN))
import check_links  # noqa: E402
import proto_md  # noqa: E402

sys.path.remove(str(GEN))


@pytest.fixture(scope="module")
def fds():  # type: ignore[no-untyped-def]
    return proto_md.descriptor_set()


def test_every_service_rpc_message_and_enum_is_documented(fds) -> None:  # type: ignore[no-untyped-def]
    page = proto_md.render(fds)
    engram = [f for f in fds.file if f.package == "engram.v1"]
    assert engram
    for f in engram:
        for service in f.service:
            assert f"## {service.name}\n" in page
            for method in service.method:
                row = next(line for line in page.splitlines() if line.startswith(f"| `{method.name}` |"))
                assert "the common codes" in row, row
        for message in f.message_type:
            assert f"### {message.name}\n" in page
            for field in message.field:
                assert f"| `{field.name}` | {field.number} |" in page
        for enum in f.enum_type:
            assert f"### {enum.name}\n" in page
            for value in enum.value:
                assert f"| `{value.name}` | {value.number} |" in page


def test_an_rpc_without_its_status_codes_fails_the_build(fds, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    codes = dict(proto_md.RPC_CODES)
    codes.pop("Search")
    monkeypatch.setattr(proto_md, "RPC_CODES", codes)
    with pytest.raises(SystemExit, match="Search"):
        proto_md.render(fds)


def test_comments_and_readme_references_become_text_and_links(fds) -> None:  # type: ignore[no-untyped-def]
    page = proto_md.render(fds)
    assert "Memories of one tenant at a time" in page          # the service's comment
    assert 'README "' not in page
    assert "[Ranking](../concepts/ranking.md)" in page


def _site(tmp_path: Path, index_body: str) -> Path:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="there">x</h2><img src="../pic.png">')
    (tmp_path / "pic.png").write_bytes(b"png")
    (tmp_path / "index.html").write_text(f'<html><body id="top">{index_body}</body></html>')
    return tmp_path


def test_link_check_passes_live_links(tmp_path: Path) -> None:
    site = _site(tmp_path, '<a href="a/">a</a><a href="a/index.html#there">b</a><a href="#top">c</a>'
                           '<a href="https://example.com/x">d</a><a href="mailto:x@example.com">e</a>')
    assert check_links.dead_links(site) == []


def test_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path: Path) -> None:
    site = _site(tmp_path, '<a href="b/">gone</a><a href="a/#nowhere">no anchor</a><img src="missing.png">')
    dead = check_links.dead_links(site)
    assert len(dead) == 3, dead
    assert any("b/" in d and "no such file" in d for d in dead)
    assert any("#nowhere" in d and "no id" in d for d in dead)
    assert any("missing.png" in d for d in dead)
    assert check_links.main(["check_links", str(site)]) == 1
