// One memory: every field, the supersede and update chain (History), where it came from (source refs), its audit
// entries, and the actions on it (confirm when pending; delete, after a confirmation step).

import {get, post} from "../api.js";
import {h, table, memoryHref, tenantHref, fmtField, fmtTime, statusChip, errorBox, confirmStep} from "../dom.js";

export function auditRows(tenant, entries) {
  return entries.map((e) => h("tr", {"data-id": String(e.entry_id)},
    h("td", {class: "nowrap"}, fmtTime(e.at_ms)), h("td", {}, h("span", {class: `chip op-${e.op.toLowerCase()}`}, e.op)),
    h("td", {}, e.key_id || "—"), h("td", {class: "content"}, e.query || ""), h("td", {}, e.note || ""),
    h("td", {class: "refs"}, e.refs.map((r) => h("div", {},
      h("a", {href: memoryHref(tenant, r.memory_id)}, r.memory_id),
      r.related_id ? [" → ", h("a", {href: memoryHref(tenant, r.related_id)}, r.related_id)] : null,
      r.source_refs.length ? h("span", {class: "muted"}, ` from ${r.source_refs.join(", ")}`) : null)))));
}

export const AUDIT_HEADERS = ["time (UTC)", "op", "key id", "query", "note", "memories (→ related; sources)"];

function chain(tenant, history, current) {
  return h("ol", {class: "chain", "data-test": "history"}, history.versions.map((v) =>
    h("li", {class: v.memory_id === current ? "current" : "", "data-id": v.memory_id},
      h("a", {href: memoryHref(tenant, v.memory_id)}, v.memory_id), " ", statusChip(v.status),
      v.memory_id === history.latest_id ? h("span", {class: "chip"}, "latest") : null,
      h("div", {class: "content"}, v.content),
      h("div", {class: "muted"}, `created ${fmtTime(v.created_at_ms)}`,
        v.superseded_by ? ` · superseded by ${v.superseded_by}` : "",
        v.updated_by ? ` · updated by ${v.updated_by}` : "",
        (v.updates || []).length ? ` · updates ${v.updates.join(", ")}` : ""))));
}

export async function memoryPage(ctx, tenant, id) {
  const reply = await get("/api/memory", {tenant, id});
  if (!reply.memory) return h("section", {}, h("h1", {}, "Not found"), h("p", {}, `No memory ${id} in ${tenant}.`));
  const m = reply.memory;
  const message = h("div", {"aria-live": "polite"});
  const fields = table(["field", "value"], Object.entries(m).map(([name, value]) =>
    h("tr", {"data-field": name}, h("th", {}, name), h("td", {class: name === "content" ? "content" : ""},
      name === "status" ? statusChip(value) : fmtField(name, value)))), {class: "fields", "data-test": "fields"});
  const sources = [m.source_ref, ...(m.source_refs || [])].filter(Boolean);
  const actions = h("div", {class: "actions"});
  if (m.status === "PENDING") {
    actions.appendChild(h("button", {type: "button", "data-test": "confirm", on: {click: async () => {
      try {
        await post("/api/confirm", {tenant, ids: [id]});
        window.dispatchEvent(new HashChangeEvent("hashchange"));
      } catch (e) { message.replaceChildren(errorBox(e)); }
    }}}, "Confirm"));
  }
  actions.appendChild(h("button", {type: "button", class: "danger", "data-test": "delete", on: {click: async () => {
    if (!await confirmStep(`Delete memory ${id} for good? Its text leaves the store; the audit log keeps the id.`,
      "Delete")) return;
    try {
      const r = await post("/api/delete", {tenant, ids: [id]});
      message.replaceChildren(h("p", {class: "ok", "data-test": "deleted"}, `Deleted ${r.deleted} memory.`));
      actions.replaceChildren(h("a", {href: tenantHref(tenant, "memories")}, "back to memories"));
    } catch (e) { message.replaceChildren(errorBox(e)); }
  }}}, "Delete…"));
  return h("section", {},
    h("h1", {}, "Memory ", h("code", {}, id)),
    h("p", {class: "content big", "data-test": "content"}, m.content),
    actions, message,
    h("div", {class: "cols"},
      h("div", {}, h("h2", {}, "Fields"), fields),
      h("div", {},
        h("h2", {}, "Supersede chain"), chain(tenant, reply.history, id),
        h("h2", {}, "Source refs"),
        sources.length ? h("ul", {"data-test": "sources"}, sources.map((s) => h("li", {}, h("code", {}, s)))) :
          h("p", {class: "muted"}, "No source ref recorded."))),
    h("h2", {}, "Audit entries"),
    reply.audit.length ? table(AUDIT_HEADERS, auditRows(tenant, reply.audit), {class: "grid", "data-test": "memory-audit"}) :
      h("p", {class: "muted"}, "No audit entry names this memory."),
    reply.audit_more ? h("p", {}, h("a", {href: tenantHref(tenant, "audit", {memory: id})}, "more in the audit log →")) : null);
}
