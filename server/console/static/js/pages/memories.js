// A tenant's memories through List: filters by type, status, entity, key, scope and creation time; pages.
// The filters live in the page's address (#/t/…/memories?type=…), so a view can be bookmarked and Back works.

import {get} from "../api.js";
import {h, table, tenantHref, memoryHref, fmtTime, fmtNum, statusChip, checkboxes, field, formValues, list,
  msFromInput, inputFromMs} from "../dom.js";

const TYPES = ["EPISODIC", "SEMANTIC", "PROCEDURAL"];

export function memoryRows(tenant, memories) {
  return memories.map((m) => h("tr", {"data-id": m.memory_id},
    h("td", {class: "content"}, h("a", {href: memoryHref(tenant, m.memory_id)}, m.content)),
    h("td", {}, m.type.toLowerCase()), h("td", {}, statusChip(m.status)), h("td", {}, fmtNum(m.importance, 2)),
    h("td", {}, m.entities.join(", ")), h("td", {}, m.key || ""), h("td", {}, m.scope || ""),
    h("td", {}, m.source_ref || ""), h("td", {class: "nowrap"}, fmtTime(m.created_at_ms))));
}

export const MEMORY_HEADERS = ["content", "type", "status", "importance", "entities", "key", "scope", "source",
  "created (UTC)"];

export async function memoriesPage(ctx, tenant) {
  const p = ctx.params;
  const query = {tenant, type: p.getAll("type"), status: p.getAll("status"), entity: p.getAll("entity"),
    key: p.get("key") || "", scope: p.get("scope") || "", created_after_ms: p.get("created_after_ms") || "",
    created_before_ms: p.get("created_before_ms") || "", page_size: p.get("page_size") || "50",
    page_token: p.get("page_token") || ""};
  const reply = await get("/api/memories", query);
  const form = h("form", {class: "filters", "data-test": "memory-filters"},
    field("type", checkboxes("type", TYPES, query.type)),
    field("status", checkboxes("status", ctx.info.statuses, query.status)),
    field("entity", h("input", {name: "entity", value: query.entity.join(","), placeholder: "alice,bob (any)"})),
    field("key", h("input", {name: "key", value: query.key})),
    field("scope", h("input", {name: "scope", value: query.scope})),
    field("created after (UTC)", h("input", {type: "datetime-local", name: "after",
      value: inputFromMs(query.created_after_ms)})),
    field("created before (UTC)", h("input", {type: "datetime-local", name: "before",
      value: inputFromMs(query.created_before_ms)})),
    field("per page", h("input", {type: "number", name: "page_size", min: 1, max: 1000, value: query.page_size})),
    h("button", {type: "submit"}, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const v = formValues(form);
    window.location.hash = tenantHref(tenant, "memories", {type: list(v.type), status: list(v.status),
      entity: String(v.entity || "").split(",").map((x) => x.trim()).filter(Boolean), key: v.key, scope: v.scope,
      created_after_ms: msFromInput(v.after), created_before_ms: msFromInput(v.before), page_size: v.page_size});
  });
  const base = {type: query.type, status: query.status, entity: query.entity, key: query.key, scope: query.scope,
    created_after_ms: query.created_after_ms, created_before_ms: query.created_before_ms, page_size: query.page_size};
  const next = reply.next_page_token ? h("a", {href: tenantHref(tenant, "memories",
    {...base, page_token: reply.next_page_token}), "data-test": "next-page"}, "next page →") : null;
  return h("section", {},
    h("h1", {}, `Memories of ${tenant}`), form,
    h("p", {class: "muted"}, `${reply.memories.length} on this page`, query.page_token ? " (not the first page)" : ""),
    reply.memories.length ? table(MEMORY_HEADERS, memoryRows(tenant, reply.memories), {class: "grid", "data-test": "memories"}) :
      h("p", {}, "No memory matches."),
    h("p", {class: "pager"}, query.page_token ? h("a", {href: tenantHref(tenant, "memories", base)}, "← first page") : null,
      " ", next));
}
