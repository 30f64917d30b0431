// Pending memories (written with low confidence): confirm makes one ACTIVE (superseding what it replaces);
// reject deletes it, after a confirmation step. Both go through the engine and into the audit log.

import {get, post} from "../api.js";
import {h, memoryHref, fmtTime, fmtNum, errorBox, confirmStep, tenantHref} from "../dom.js";

function row(tenant, m) {
  const note = h("div", {class: "row-note", "aria-live": "polite"});
  const buttons = h("div", {class: "actions"});
  const settle = (text, kind) => {
    buttons.replaceChildren();
    note.replaceChildren(h("span", {class: kind, "data-test": "outcome"}, text));
  };
  buttons.append(
    h("button", {type: "button", "data-test": "confirm", on: {click: async () => {
      try {
        const r = await post("/api/confirm", {tenant, ids: [m.memory_id]});
        const result = r.results[0];
        settle(`confirmed: now ${result.memory.status}` +
          (result.superseded.length ? `, superseding ${result.superseded.join(", ")}` : ""), "ok");
      } catch (e) { note.replaceChildren(errorBox(e)); }
    }}}, "Confirm"),
    h("button", {type: "button", class: "danger", "data-test": "reject", on: {click: async () => {
      if (!await confirmStep(`Reject (delete) the pending memory "${m.content.slice(0, 80)}"?`, "Reject")) return;
      try {
        const r = await post("/api/delete", {tenant, ids: [m.memory_id]});
        settle(r.deleted ? "rejected: deleted" : "already gone", "ok");
      } catch (e) { note.replaceChildren(errorBox(e)); }
    }}}, "Reject…"));
  return h("li", {class: "pending", "data-id": m.memory_id},
    h("div", {class: "content"}, h("a", {href: memoryHref(tenant, m.memory_id)}, m.content)),
    h("div", {class: "muted"}, `${m.type.toLowerCase()} · confidence ${fmtNum(m.confidence, 2)} · ` +
      `written ${fmtTime(m.created_at_ms)}`, m.source_ref ? ` · from ${m.source_ref}` : "",
      m.key ? ` · key ${m.key}` : ""),
    buttons, note);
}

export async function pendingPage(ctx, tenant) {
  const reply = await get("/api/memories", {tenant, status: "PENDING", page_size: 200,
    page_token: ctx.params.get("page_token") || ""});
  return h("section", {},
    h("h1", {}, `Pending memories · ${tenant}`),
    reply.memories.length ? h("ul", {class: "pending-list", "data-test": "pending"},
      reply.memories.map((m) => row(tenant, m))) : h("p", {}, "Nothing is waiting for confirmation."),
    reply.next_page_token ? h("p", {}, h("a", {href: tenantHref(tenant, "pending",
      {page_token: reply.next_page_token})}, "more →")) : null);
}
