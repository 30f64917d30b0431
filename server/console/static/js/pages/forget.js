// Forget: a filter and an age bound; a dry run shows what would go, then a confirmation step does it.
// Archive keeps the memories (status ARCHIVED); delete purges them from the store.

import {post} from "../api.js";
import {h, memoryHref, checkboxes, field, formValues, list, msFromInput, errorBox, confirmStep} from "../dom.js";

const TYPES = ["EPISODIC", "SEMANTIC", "PROCEDURAL"];
const DAY_MS = 86400000;

export async function forgetPage(ctx, tenant) {
  const out = h("div", {"aria-live": "polite"});
  const form = h("form", {class: "filters", "data-test": "forget-form"},
    field("type", checkboxes("type", TYPES, [])),
    field("status", checkboxes("status", ctx.info.statuses, [])),
    field("entity", h("input", {name: "entity", placeholder: "any of, comma-separated"})),
    field("key", h("input", {name: "key"})),
    field("scope", h("input", {name: "scope"})),
    field("created before (UTC)", h("input", {type: "datetime-local", name: "before"})),
    field("older than (days)", h("input", {type: "number", name: "older_days", min: 0, step: "any"})),
    field("mode", h("select", {name: "mode"}, h("option", {value: "ARCHIVE"}, "archive (keep, hide from search)"),
      h("option", {value: "DELETE"}, "delete (purge)"))),
    field("also", h("span", {class: "checks"},
      h("label", {}, h("input", {type: "checkbox", name: "include_pinned", value: "true"}), " pinned"),
      h("label", {}, h("input", {type: "checkbox", name: "all", value: "true"}), " everything (no filter)"))),
    h("button", {type: "submit"}, "Preview"));
  const spec = () => {
    const v = formValues(form);
    return {tenant, mode: v.mode, include_pinned: Boolean(v.include_pinned), all: Boolean(v.all),
      older_than_ms: v.older_days ? String(Math.round(Number(v.older_days) * DAY_MS)) : "",
      filter: {types: list(v.type), statuses: list(v.status), key: v.key, scope: v.scope,
        entities: String(v.entity || "").split(",").map((x) => x.trim()).filter(Boolean),
        created_before_ms: msFromInput(v.before)}};
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = spec();
    try {
      const preview = await post("/api/forget", {...body, dry_run: true});
      const verb = body.mode === "DELETE" ? "delete" : "archive";
      const go = h("button", {type: "button", class: "danger", "data-test": "forget-run", on: {click: async () => {
        if (!await confirmStep(`${verb} ${preview.count} memories of ${tenant}?`, `Yes, ${verb}`)) return;
        try {
          const done = await post("/api/forget", {...body, dry_run: false});
          out.replaceChildren(h("p", {class: "ok", "data-test": "forget-done"}, `${verb}d ${done.count} memories.`));
        } catch (e) { out.replaceChildren(errorBox(e)); }
      }}}, `${verb} ${preview.count}…`);
      out.replaceChildren(h("p", {"data-test": "forget-preview"}, `${preview.count} memories match.`),
        h("ul", {class: "ids"}, preview.memory_ids.slice(0, 50).map((id) =>
          h("li", {}, h("a", {href: memoryHref(tenant, id)}, id)))),
        preview.count ? go : null);
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  });
  return h("section", {}, h("h1", {}, `Forget · ${tenant}`),
    h("p", {class: "muted"}, "Nothing changes until you confirm after the preview."), form, out);
}
