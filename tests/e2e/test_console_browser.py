"""The console in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright against
the real server. One server and one browser for the module; a fresh browser context (no cookies) per test.

Screenshots go to a temp folder, or to ``ENGRAM_CONSOLE_SCREENSHOTS`` when set (the README's come from
``ENGRAM_CONSOLE_SCREENSHOTS=docs/console .venv/bin/python -m pytest -q tests/e2e/test_console_browser.py``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import XSS, Seeded, module_fixtures
from memory_support import get_one, write_one
from support import ADMIN_KEY, RunningServer

from server.domain import Breakdown
from engram_proto.v1 import messages_pb2 as pb

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements.txt)")
CHROMIUM = os.environ.get("ENGRAM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="no Chromium for the console's browser tests: apt-get install -y chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
expect = playwright_api.expect
T = "acme/alice"

running, seeded = module_fixtures()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("ENGRAM_CONSOLE_SCREENSHOTS") or tmp_path_factory.mktemp("console-shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Console:
    """One browser tab on the console; collects uncaught page errors, which fail the test."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def login(self, key: str) -> Console:
        self.page.goto(self.base + "/")
        self.page.fill("[data-test=login] input[name=key]", key)
        self.page.click("[data-test=login] button[type=submit]")
        expect(self.page.locator("[data-test=who]")).to_be_visible()
        return self

    def open(self, fragment: str) -> Any:
        """Goes to a console address and waits until that page has rendered (or shown its error)."""
        self.page.goto(f"{self.base}/#{fragment}")
        self.page.wait_for_function("""h => { const m = document.getElementById("main");
            return m.dataset.hash === h && m.dataset.state === "ready"; }""", arg=f"#{fragment}")
        return self.page

    def painted(self, selector: str) -> bool:
        return bool(self.page.eval_on_selector(selector, """c => {
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
            return false; }"""))

    def shot(self, path: Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 20_000


@pytest.fixture
def tab(browser: Any, running: RunningServer, seeded: Seeded) -> Iterator[Console]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    console = Console(context.new_page(), f"http://127.0.0.1:{running.app.console_port}")
    yield console
    context.close()
    assert not console.errors, console.errors


def enc(tenant: str) -> str:
    return tenant.replace("/", "%2F")


def test_login_shows_the_tenants_and_keeps_the_key_out_of_the_page(tab: Console, running: RunningServer,
                                                                  shots: Path) -> None:
    every = running.client().list_all(T)
    page = tab.login(ADMIN_KEY).page
    rows = page.locator("[data-test=tenants] tbody tr")
    expect(rows).to_have_count(2)
    alice = page.locator("[data-test=tenants] tr[data-id='acme/alice']")
    expect(alice.locator("td[data-field=total]")).to_have_text(str(len(every)))
    expect(alice.locator("td[data-field=PENDING]")).to_have_text("1")
    expect(alice.locator("td[data-field=SUPERSEDED]")).to_have_text("1")
    expect(alice.locator("td[data-field=PROCEDURAL]")).to_have_text("1")
    expect(alice.locator("td[data-field=tier]")).to_have_text("flat")
    expect(alice.locator("td[data-field=ram]")).to_contain_text("KiB")
    expect(alice.locator("td[data-field=last]")).to_contain_text("ago")
    expect(page.locator("[data-test=tenants] tr[data-id='beta/bob'] td[data-field=total]")).to_have_text("1")
    assert ADMIN_KEY not in page.url
    stored = page.evaluate("() => JSON.stringify([document.cookie, {...localStorage}, {...sessionStorage}])")
    assert ADMIN_KEY not in stored and "engram_console" not in stored   # the session cookie is HttpOnly
    tab.shot(shots / "console-tenants.png")
    page.click("[data-test=logout]")
    expect(page.locator("[data-test=login]")).to_be_visible()
    assert page.evaluate("async () => (await fetch('/api/session')).status") == 401


def test_tenant_page_counts_index_and_memories_over_time(tab: Console, running: RunningServer, shots: Path) -> None:
    page = tab.login(ADMIN_KEY).open(f"/t/{enc(T)}")
    every = running.client().list_all(T)
    expect(page.locator("[data-test=counts] td[data-field='all.all']")).to_have_text(str(len(every)))
    semantic_active = sum(m.type == pb.MEMORY_TYPE_SEMANTIC and m.status == pb.MEMORY_STATUS_ACTIVE for m in every)
    expect(page.locator("[data-test=counts] td[data-field='SEMANTIC.ACTIVE']")).to_have_text(str(semantic_active))
    expect(page.locator("dd[data-field=dense_tier]")).to_have_text("flat")
    assert tab.painted("figure.chart canvas")
    expect(page.locator("#tenant-nav a")).to_have_text(["overview", "memories", "search", "pending", "audit", "forget"])
    tab.shot(shots / "console-tenant.png")
    page.click("#tenant-nav a:text-is('pending')")
    expect(page.locator("[data-test=pending] li")).to_have_count(1)


def test_memories_page_filters_and_pages(tab: Console, running: RunningServer) -> None:
    ids = [m.memory_id for m in running.client().list_all(T)]
    page = tab.login(ADMIN_KEY).open(f"/t/{enc(T)}/memories")
    expect(page.locator("[data-test=memories] tbody tr")).to_have_count(len(ids))
    page.check("[data-test=memory-filters] input[name=type][value=PROCEDURAL]")
    page.click("[data-test=memory-filters] button[type=submit]")
    expect(page.locator("[data-test=memories] tbody tr")).to_have_count(1)
    expect(page.locator("[data-test=memories] tbody tr td.content")).to_have_text(
        "To book a table, call the restaurant before noon")
    page = tab.open(f"/t/{enc(T)}/memories?page_size=3")
    expect(page.locator("[data-test=memories] tbody tr")).to_have_count(3)
    first = page.locator("[data-test=memories] tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")
    page.click("[data-test=next-page]")
    expect(page.locator("[data-test=memories] tbody tr").first).not_to_have_attribute("data-id", first[0])
    second = page.locator("[data-test=memories] tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")
    assert first + second == ids[:6]


def test_memory_page_fields_supersede_chain_sources_and_audit(tab: Console, seeded: Seeded) -> None:
    page = tab.login(ADMIN_KEY).open(f"/t/{enc(T)}/memory/{seeded.old_city_id}")
    expect(page.locator("[data-test=content]")).to_have_text("Alice lives in Porto")
    expect(page.locator("[data-test=fields] tr[data-field=status] td")).to_have_text("SUPERSEDED")
    expect(page.locator("[data-test=fields] tr[data-field=superseded_by] td")).to_have_text(seeded.new_city_id)
    chain = page.locator("[data-test=history] li")
    expect(chain).to_have_count(2)
    assert chain.evaluate_all("ls => ls.map(l => l.dataset.id)") == [seeded.old_city_id, seeded.new_city_id]
    expect(page.locator(f"[data-test=history] li[data-id='{seeded.new_city_id}']")).to_contain_text("latest")
    expect(page.locator("[data-test=sources]")).to_contain_text("chat-2#5")
    ops = page.locator("[data-test=memory-audit] tbody tr td:nth-child(2)").all_inner_texts()
    assert "WRITE" in ops and "SUPERSEDE" in ops
    page.click(f"[data-test=history] li[data-id='{seeded.new_city_id}'] a")
    expect(page.locator("[data-test=content]")).to_have_text("Alice moved to Lisbon in March")


def test_search_playground_shows_each_breakdown_as_bars_and_the_agents_context_block(
        tab: Console, running: RunningServer, seeded: Seeded, shots: Path) -> None:
    page = tab.login(seeded.alice_key).open(f"/t/{enc(T)}/search")
    as_of = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    text = "does alice have any food allergy?"
    page.fill("[data-test=search-form] input[name=text]", text)
    page.fill("[data-test=search-form] input[name=top_k]", "5")
    page.fill("[data-test=search-form] input[name=as_of]", as_of.strftime("%Y-%m-%dT%H:%M"))
    page.click("[data-test=search-form] button[type=submit]")
    hits = page.locator("li.hit")
    expect(hits.first.locator(".content")).to_have_text("Alice is allergic to peanuts")
    wire = running.client(seeded.alice_key).search(T, text, top_k=5, context_block=True,
                                                   scoring=pb.Scoring(now_ms=int(as_of.timestamp() * 1000)))
    assert hits.evaluate_all("hs => hs.map(h => h.dataset.id)") == [h.memory.memory_id for h in wire.hits]
    assert page.inner_text("[data-test=context-block]") == wire.context_block
    hits.first.locator("[data-test=toggle-breakdown]").click()
    rows = hits.first.locator("[data-test=breakdown] .bd-row")
    fields = [f.name for f in dataclasses.fields(Breakdown)]
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.field)") == fields
    widths = rows.locator(".fill").evaluate_all("fs => fs.map(f => f.getBoundingClientRect().width)")
    assert widths[fields.index("final")] > 100 and widths[fields.index("relevance")] > 0
    expect(hits.first.locator(".bd-row[data-field=dense_rank] .bd-value")).to_have_text(
        f"#{wire.hits[0].breakdown.dense_rank}")
    expect(hits.first.locator(".bd-row[data-field=final] .bd-value")).to_have_text(f"{wire.hits[0].breakdown.final:.4f}")
    tab.shot(shots / "console-search.png")


def test_pending_memories_are_confirmed_or_rejected_after_a_confirmation_step(tab: Console, running: RunningServer,
                                                                              seeded: Seeded) -> None:
    admin = running.client()
    doubtful = write_one(admin, T, "Alice might work from Madrid next year", confidence=0.3).memory_id
    page = tab.login(seeded.alice_key).open(f"/t/{enc(T)}/pending")
    row = page.locator(f"[data-test=pending] li[data-id='{seeded.pending_id}']")
    row.locator("[data-test=confirm]").click()
    expect(row.locator("[data-test=outcome]")).to_have_text("confirmed: now ACTIVE")
    assert get_one(admin, T, seeded.pending_id).status == pb.MEMORY_STATUS_ACTIVE

    other = page.locator(f"[data-test=pending] li[data-id='{doubtful}']")
    other.locator("[data-test=reject]").click()
    page.click("#confirm-cancel")                       # cancelled: nothing happens
    expect(other.locator("[data-test=reject]")).to_be_visible()
    assert get_one(admin, T, doubtful).status == pb.MEMORY_STATUS_PENDING
    other.locator("[data-test=reject]").click()
    expect(page.locator("#confirm-text")).to_contain_text("Madrid")
    page.click("#confirm-ok")
    expect(other.locator("[data-test=outcome]")).to_have_text("rejected: deleted")
    assert list(admin.get(T, doubtful).missing) == [doubtful]


def test_forget_previews_then_archives_after_confirmation(tab: Console, running: RunningServer) -> None:
    admin = running.client()
    ids = [write_one(admin, T, f"Alice's old desk note {i}", key=f"desk-{i}", scope="desk").memory_id for i in range(2)]
    page = tab.login(ADMIN_KEY).open(f"/t/{enc(T)}/forget")
    page.fill("[data-test=forget-form] input[name=scope]", "desk")
    page.click("[data-test=forget-form] button[type=submit]")
    expect(page.locator("[data-test=forget-preview]")).to_have_text("2 memories match.")
    assert all(get_one(admin, T, i).status == pb.MEMORY_STATUS_ACTIVE for i in ids)   # the preview is a dry run
    page.click("[data-test=forget-run]")
    page.click("#confirm-ok")
    expect(page.locator("[data-test=forget-done]")).to_have_text("archived 2 memories.")
    assert all(get_one(admin, T, i).status == pb.MEMORY_STATUS_ARCHIVED for i in ids)


def test_delete_from_the_memory_page_asks_first(tab: Console, running: RunningServer) -> None:
    admin = running.client()
    doomed = write_one(admin, T, "Alice's temporary locker code is 1234").memory_id
    page = tab.login(ADMIN_KEY).open(f"/t/{enc(T)}/memory/{doomed}")
    page.click("[data-test=delete]")
    expect(page.locator("#confirm-dialog")).to_be_visible()
    page.click("#confirm-ok")
    expect(page.locator("[data-test=deleted]")).to_have_text("Deleted 1 memory.")
    assert list(admin.get(T, doomed).missing) == [doomed]


def test_audit_page_filters_by_operation_and_memory(tab: Console, seeded: Seeded) -> None:
    page = tab.login(ADMIN_KEY).open(f"/t/{enc(T)}/audit")
    expect(page.locator("[data-test=audit] tbody tr").first).to_be_visible()
    page.check("[data-test=audit-filters] input[name=op][value=SUPERSEDE]")
    page.click("[data-test=audit-filters] button[type=submit]")
    expect(page.locator("[data-test=audit] tbody tr")).to_have_count(1)
    expect(page.locator("[data-test=audit] tbody tr td.refs")).to_contain_text(seeded.old_city_id)
    page = tab.open(f"/t/{enc(T)}/audit?memory={seeded.new_city_id}")
    ops = page.locator("[data-test=audit] tbody tr td:nth-child(2)").all_inner_texts()
    assert "WRITE" in ops and "SUPERSEDE" in ops


def test_a_memory_holding_script_renders_as_text_everywhere(tab: Console, seeded: Seeded) -> None:
    page = tab.login(ADMIN_KEY).open(f"/t/{enc(T)}/memory/{seeded.xss_id}")
    expect(page.locator("[data-test=content]")).to_have_text(XSS)
    expect(page.locator("[data-test=fields] tr[data-field=entities] td")).to_have_text("<i>x</i>")
    expect(page.locator("[data-test=sources]")).to_contain_text("chat-<b>15</b>#1")
    page = tab.open(f"/t/{enc(T)}/memories")
    expect(page.locator(f"[data-test=memories] tr[data-id='{seeded.xss_id}'] td.content")).to_have_text(XSS)
    page = tab.open(f"/t/{enc(T)}/search")
    page.fill("[data-test=search-form] input[name=text]", "script tag more")
    page.click("[data-test=search-form] button[type=submit]")
    expect(page.locator(f"li.hit[data-id='{seeded.xss_id}'] .content")).to_have_text(XSS)
    expect(page.locator("[data-test=context-block]")).to_contain_text("<script>window.__xss = 1</script>")
    assert page.evaluate("() => window.__xss") is None
    assert page.evaluate("() => document.querySelectorAll('main script, main img, main b, main i').length") == 0


def test_the_browser_enforces_the_policy_against_inline_script(tab: Console) -> None:
    page = tab.login(ADMIN_KEY).page
    blocked = page.evaluate("""() => new Promise(resolve => {
        document.addEventListener("securitypolicyviolation", e => resolve(e.violatedDirective), {once: true});
        const s = document.createElement("script");
        s.textContent = "window.__inline = 1";
        document.body.appendChild(s);
        setTimeout(() => resolve(window.__inline === 1 ? "ran" : "no event"), 2000);
    })""")
    assert blocked.startswith("script-src")
    assert page.evaluate("() => window.__inline") is None


def test_a_key_for_acme_alice_sees_nothing_of_beta(tab: Console, seeded: Seeded) -> None:
    page = tab.login(seeded.alice_key).page
    expect(page.locator("[data-test=tenants] tbody tr")).to_have_count(1)
    expect(page.locator("[data-test=tenants] tbody tr td a")).to_have_text(T)
    expect(page.locator("[data-test=tenants] td[data-field=total]")).not_to_have_text("…")
    expect(page.locator("[data-test=tenants] td[data-field=tier]")).to_have_text("—")   # Stats: admin keys only
    expect(page.locator("[data-test=who]")).to_contain_text("acme/alice")
    for fragment in (f"/t/{enc('beta/bob')}", f"/t/{enc('beta/bob')}/memories", f"/t/{enc('beta/bob')}/audit"):
        tab.open(fragment)
        expect(page.locator("main .error")).to_contain_text("PERMISSION_DENIED")
        assert "4242" not in page.inner_text("body")
    tab.open(f"/t/{enc('beta/bob')}/search")
    page.fill("[data-test=search-form] input[name=text]", "launch code")
    page.click("[data-test=search-form] button[type=submit]")
    expect(page.locator("main .error")).to_contain_text("PERMISSION_DENIED")
    assert "4242" not in page.inner_text("body")


def test_server_page_plots_recency_curves_and_recent_stage_latencies(tab: Console, running: RunningServer,
                                                                    seeded: Seeded) -> None:
    client = running.client(seeded.alice_key)
    for text in ("where does alice live now", "what does alice eat", "how to book a table"):
        client.search(T, text)
    page = tab.login(ADMIN_KEY).open("/server")
    charts = page.locator("figure.chart canvas")
    expect(charts).to_have_count(2)
    assert tab.painted("figure.chart:nth-of-type(1) canvas") and charts.nth(1).evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " return d.some((v, i) => i % 4 === 3 && v > 0); }")
    expect(page.locator("[data-test=stage-summary] tr[data-field=embed]")).to_be_visible()
    half_life_d = running.app.config.scoring.episodic_half_life_s / 86400
    shown = str(int(half_life_d)) if half_life_d == int(half_life_d) else f"{half_life_d:.1f}"
    expect(page.locator("main")).to_contain_text(f"episodic: half-life {shown} d")
