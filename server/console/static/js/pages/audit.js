// The tenant's audit log (oldest first, as the log is written), filtered by operation and memory id.

import {get} from "../api.js";
import {h, table, tenantHref, checkboxes, field, formValues, list} from "../dom.js";
import {auditRows, AUDIT_HEADERS} from "./memory.js";

export async function auditPage(ctx, tenant) {
  const p = ctx.params;
  const query = {tenant, op: p.getAll("op"), memory: p.get("memory") || "", page_size: p.get("page_size") || "100",
    page_token: p.get("page_token") || ""};
  const reply = await get("/api/audit", query);
  const form = h("form", {class: "filters", "data-test": "audit-filters"},
    field("operation", checkboxes("op", ctx.info.audit_ops, query.op)),
    field("memory id", h("input", {name: "memory", value: query.memory})),
    field("per page", h("input", {type: "number", name: "page_size", min: 1, max: 1000, value: query.page_size})),
    h("button", {type: "submit"}, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const v = formValues(form);
    window.location.hash = tenantHref(tenant, "audit", {op: list(v.op), memory: v.memory, page_size: v.page_size});
  });
  const base = {op: query.op, memory: query.memory, page_size: query.page_size};
  return h("section", {},
    h("h1", {}, `Audit log · ${tenant}`), form,
    reply.entries.length ? table(AUDIT_HEADERS, auditRows(tenant, reply.entries), {class: "grid", "data-test": "audit"}) :
      h("p", {}, "No entry matches."),
    h("p", {class: "pager"},
      query.page_token ? h("a", {href: tenantHref(tenant, "audit", base)}, "← from the start") : null, " ",
      reply.next_page_token ? h("a", {href: tenantHref(tenant, "audit", {...base, page_token: reply.next_page_token}),
        "data-test": "next-page"}, "next page →") : null));
}
