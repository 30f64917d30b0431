// Tenants the key covers: registry state (admin keys) and, per tenant, counts read through List.

import {get} from "../api.js";
import {h, table, tenantHref, fmtAge, fmtBytes, errorBox} from "../dom.js";

const PAGE = 25;
const STATUSES = ["ACTIVE", "PENDING", "SUPERSEDED", "EXPIRED", "ARCHIVED"];
const TYPES = ["EPISODIC", "SEMANTIC", "PROCEDURAL"];

export async function tenantsPage(ctx) {
  const reply = await get("/api/tenants");
  const start = Math.max(0, Number(ctx.params.get("from") || 0));
  const shown = reply.tenants.slice(start, start + PAGE);
  const headers = ["tenant", "memories", ...STATUSES.map((s) => s.toLowerCase()), ...TYPES.map((t) => t.toLowerCase()),
    "index tier", "index", "memory use", "last activity"];
  const rows = shown.map((t) => {
    const cells = {};
    const cell = (name, text = "…") => (cells[name] = h("td", {"data-field": name}, text));
    const row = h("tr", {"data-id": t.tenant_id},
      h("td", {}, h("a", {href: tenantHref(t.tenant_id)}, t.tenant_id)),
      cell("total"), STATUSES.map((s) => cell(s)), TYPES.map((x) => cell(x)),
      cell("tier", "—"), cell("index", "—"), cell("ram", "—"), cell("last"));
    const showStats = (s) => {
      cells.tier.textContent = s.dense_tier || s.state || "—";
      cells.index.textContent = s.dense_index || "—";
      cells.ram.textContent = s.ram_bytes ? fmtBytes(s.ram_bytes) : "—";
    };
    if (t.stats) showStats(t.stats);
    row.fill = (summary) => {
      if (summary.stats) showStats(summary.stats);   // reading its memories loaded the tenant
      cells.total.textContent = summary.complete ? summary.total : `≥ ${summary.total}`;
      for (const s of STATUSES) cells[s].textContent = summary.by_status[s] ?? 0;
      for (const x of TYPES) cells[x].textContent = summary.by_type[x] ?? 0;
      cells.last.textContent = fmtAge(summary.last_activity_ms);
    };
    return row;
  });
  const view = h("section", {},
    h("h1", {}, "Tenants"),
    h("p", {class: "muted"}, `${reply.tenants.length} tenant(s) this key covers.`,
      reply.stats_note ? ` ${reply.stats_note}.` : ""),
    reply.tenants.length ? table(headers, rows, {class: "grid", "data-test": "tenants"}) :
      h("p", {}, "This key covers no tenant yet."),
    pager(start, reply.tenants.length));
  fillCounts(shown, rows);   // one tenant at a time, after the table is on screen
  return view;
}

async function fillCounts(tenants, rows) {
  for (let i = 0; i < tenants.length; i++) {
    try {
      rows[i].fill(await get("/api/tenant", {tenant: tenants[i].tenant_id}));
    } catch (e) {
      rows[i].lastChild.replaceChildren(errorBox(e));
    }
  }
}

function pager(start, total) {
  if (total <= PAGE) return null;
  return h("p", {class: "pager"},
    start > 0 ? h("a", {href: `#/?from=${Math.max(0, start - PAGE)}`}, "← previous") : null, " ",
    start + PAGE < total ? h("a", {href: `#/?from=${start + PAGE}`}, "next →") : null);
}
