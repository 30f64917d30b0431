// The search playground: one real Search (audited under this key, counted as an access unless "as of" is
// set), each hit's score breakdown as bars, and the prompt-ready context block exactly as an agent gets it.

import {post} from "../api.js";
import {h, memoryHref, statusChip, checkboxes, field, formValues, list, msFromInput, errorBox, fmtNum} from "../dom.js";
import {breakdownPanel, scales, bar} from "../breakdown.js";

const TYPES = ["EPISODIC", "SEMANTIC", "PROCEDURAL"];
const TIMED = ["queue", "embed", "ann", "bm25", "fusion", "rerank", "decay"];

function hitView(tenant, hit, rank, fields, fieldScales, maxFinal) {
  const m = hit.memory;
  const panel = h("div", {class: "bd-wrap"});
  const toggle = h("button", {type: "button", class: "small", "data-test": "toggle-breakdown", on: {click: () => {
    if (!panel.firstChild) panel.appendChild(breakdownPanel(hit.breakdown, fields, fieldScales));
    panel.hidden = !panel.hidden;
    toggle.textContent = panel.hidden ? "breakdown" : "hide breakdown";
  }}}, "breakdown");
  panel.hidden = true;
  return h("li", {class: "hit", "data-id": m.memory_id},
    h("div", {class: "hit-head"}, h("span", {class: "rank"}, `#${rank}`),
      bar(maxFinal > 0 ? hit.breakdown.final / maxFinal : 0, "final"),
      h("span", {class: "bd-value"}, fmtNum(hit.breakdown.final, 4)), toggle),
    h("div", {class: "content"}, h("a", {href: memoryHref(tenant, m.memory_id)}, m.content)),
    h("div", {class: "muted"}, m.type.toLowerCase(), " · ", statusChip(m.status),
      m.key ? ` · key ${m.key}` : "", m.source_ref ? ` · from ${m.source_ref}` : ""),
    panel);
}

function results(tenant, reply) {
  const fields = reply.breakdown_fields;
  const fieldScales = scales(fields, reply.hits);
  const maxFinal = Math.max(0, ...reply.hits.map((x) => x.breakdown.final || 0));
  const t = reply.timings;
  const timing = TIMED.filter((s) => t[`${s}_ns`] > 0).map((s) => `${s} ${(t[`${s}_ns`] / 1e6).toFixed(1)}`).join(", ");
  return h("div", {"data-test": "results"},
    h("p", {class: "muted"}, `${reply.hits.length} hit(s) in ${(t.total_ns / 1e6).toFixed(1)} ms (${timing} ms; ` +
      `batch of ${t.batch_size})`),
    reply.hits.length ? h("ol", {class: "hits"}, reply.hits.map((hit, i) =>
      hitView(tenant, hit, i + 1, fields, fieldScales, maxFinal))) : h("p", {}, "No hit."),
    h("h2", {}, "Context block"),
    h("p", {class: "muted"}, "What an agent that asks for context_block gets, character for character."),
    h("pre", {class: "context", "data-test": "context-block"}, reply.context_block || "(empty: no hits)"));
}

export async function searchPage(ctx, tenant) {
  const out = h("div", {"aria-live": "polite"});
  const form = h("form", {class: "filters", "data-test": "search-form"},
    field("query", h("input", {name: "text", class: "wide", required: true, placeholder: "what do I remember about…",
      value: ctx.params.get("q") || ""})),
    field("top k", h("input", {type: "number", name: "top_k", min: 1, max: 1000, value: 10})),
    field("rerank depth", h("input", {type: "number", name: "rerank_depth", min: -1,
      placeholder: "server default (-1: off)"})),
    field("type", checkboxes("type", TYPES, [])),
    field("also", h("span", {class: "checks"},
      h("label", {}, h("input", {type: "checkbox", name: "include_pending", value: "true"}), " pending"),
      h("label", {}, h("input", {type: "checkbox", name: "include_history", value: "true"}), " superseded"))),
    field("entity", h("input", {name: "entity", placeholder: "any of, comma-separated"})),
    field("key", h("input", {name: "key"})),
    field("scope", h("input", {name: "scope"})),
    field("as of (UTC)", h("input", {type: "datetime-local", name: "as_of"})),
    field("lists", h("select", {name: "lists"}, h("option", {value: ""}, "dense + BM25"),
      h("option", {value: "lexical"}, "BM25 only"), h("option", {value: "dense"}, "dense only"))),
    h("button", {type: "submit"}, "Search"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const v = formValues(form);
    const entities = String(v.entity || "").split(",").map((x) => x.trim()).filter(Boolean);
    const body = {tenant, text: v.text, top_k: v.top_k, rerank_depth: v.rerank_depth, as_of_ms: msFromInput(v.as_of),
      include_pending: Boolean(v.include_pending), include_history: Boolean(v.include_history),
      lexical_only: v.lists === "lexical", dense_only: v.lists === "dense",
      filter: {types: list(v.type), entities, key: v.key, scope: v.scope}};
    out.replaceChildren(h("p", {class: "muted"}, "Searching…"));
    try {
      out.replaceChildren(results(tenant, await post("/api/search", body)));
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  });
  return h("section", {}, h("h1", {}, `Search playground · ${tenant}`),
    h("p", {class: "muted"}, "A real search: it is audited under your key and counts as an access of its hits " +
      "(as an agent's would), except with \"as of\" set, which replays the past."), form, out);
}
