// The console shell: login, the hash router (#/…: the address holds tenant ids and filters, never a key)
// and the navigation. Every page is a function that fetches what it shows and returns a DOM node.

import {get, login, logout, session, ApiError} from "./api.js";
import {h, tenantHref, errorBox} from "./dom.js";
import {tenantsPage} from "./pages/tenants.js";
import {tenantPage} from "./pages/tenant.js";
import {memoriesPage} from "./pages/memories.js";
import {memoryPage} from "./pages/memory.js";
import {searchPage} from "./pages/search.js";
import {pendingPage} from "./pages/pending.js";
import {auditPage} from "./pages/audit.js";
import {forgetPage} from "./pages/forget.js";
import {serverPage} from "./pages/server.js";

const ROUTES = [
  [/^$/, tenantsPage], [/^server$/, serverPage],
  [/^t\/([^/]+)$/, tenantPage], [/^t\/([^/]+)\/memories$/, memoriesPage],
  [/^t\/([^/]+)\/memory\/([^/]+)$/, memoryPage], [/^t\/([^/]+)\/search$/, searchPage],
  [/^t\/([^/]+)\/pending$/, pendingPage], [/^t\/([^/]+)\/audit$/, auditPage], [/^t\/([^/]+)\/forget$/, forgetPage],
];
const TENANT_PAGES = [["", "overview"], ["memories", "memories"], ["search", "search"], ["pending", "pending"],
  ["audit", "audit"], ["forget", "forget"]];

const main = document.getElementById("main");
let ctx = null;
let renderCount = 0;

function loginView(message = "") {
  const input = h("input", {type: "password", name: "key", autocomplete: "off", placeholder: "egk_…", class: "wide",
    "aria-label": "engram key", spellcheck: "false"});
  const note = h("div", {"aria-live": "polite"}, message ? errorBox({code: "LOGIN", message}) : null);
  const form = h("form", {class: "login", "data-test": "login"},
    h("h1", {}, "engram console"),
    h("p", {class: "muted"}, "Log in with an engram key. The console sees exactly the tenants that key covers; " +
      "the key stays on the server for this browser session and is never stored in the browser."),
    input, h("button", {type: "submit"}, "Log in"), note);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value;
    input.value = "";
    try {
      await login(key);
      await start();
    } catch (e) {
      note.replaceChildren(errorBox(e));
    }
  });
  document.getElementById("nav").replaceChildren();
  document.getElementById("who").replaceChildren();
  document.getElementById("tenant-nav").replaceChildren();
  main.replaceChildren(form);
  input.focus();
}

function header(principal) {
  document.getElementById("nav").replaceChildren(h("a", {href: "#/"}, "tenants"), h("a", {href: "#/server"}, "server"));
  const scope = principal.admin ? "admin" : [...principal.tenant_ids, ...principal.tenant_prefixes.map((p) => `${p}*`)].join(", ");
  document.getElementById("who").replaceChildren(
    h("span", {class: "muted", "data-test": "who"}, `${principal.name || principal.key_id} · ${scope}`),
    h("button", {type: "button", class: "small", "data-test": "logout", on: {click: async () => {
      await logout().catch(() => null);
      ctx = null;
      loginView();
    }}}, "log out"));
}

function tenantNav(tenant, current) {
  const nav = document.getElementById("tenant-nav");
  if (!tenant) return nav.replaceChildren();
  nav.replaceChildren(h("span", {class: "tenant-name"}, tenant), ...TENANT_PAGES.map(([page, name]) =>
    h("a", {href: tenantHref(tenant, page), class: page === current ? "active" : ""}, name)));
}

async function render() {
  if (!ctx) return;
  const mine = ++renderCount;
  const [path, qs] = window.location.hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(qs || "");
  const match = ROUTES.map(([re, page]) => [path.match(re), page]).find(([m]) => m);
  if (!match) {
    main.replaceChildren(h("p", {}, "No such page. ", h("a", {href: "#/"}, "Tenants")));
    return;
  }
  const [m, page] = match;
  const args = m.slice(1).map((x) => decodeURIComponent(x));
  const sub = path.startsWith("t/") ? (path.split("/")[2] || "") : "";
  tenantNav(args[0] && path.startsWith("t/") ? args[0] : null, sub === "memory" ? "memories" : sub);
  main.replaceChildren(h("p", {class: "muted"}, "Loading…"));
  main.dataset.state = "loading";   // the page's state and address, for whoever waits on it (tests)
  main.dataset.hash = window.location.hash;
  try {
    const view = await page({...ctx, params}, ...args);
    if (mine === renderCount) main.replaceChildren(view);
  } catch (e) {
    if (mine !== renderCount) return;
    if (e instanceof ApiError && e.status === 401) loginView(e.message);
    else main.replaceChildren(errorBox(e));
  }
  if (mine === renderCount) main.dataset.state = "ready";
}

async function start() {
  const reply = await session();
  const info = await get("/api/info");
  ctx = {principal: reply.principal, info};
  header(reply.principal);
  await render();
}

window.addEventListener("hashchange", render);
start().catch((e) => {
  if (e instanceof ApiError && e.status === 401) loginView();
  else main.replaceChildren(errorBox(e));
});

