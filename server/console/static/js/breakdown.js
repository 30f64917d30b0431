// A hit's score breakdown as bars, one per field the server sends (breakdown_fields, in its order), so a
// field added to the server's Breakdown shows up here without a change. Each field is scaled over the hits
// of the result: ranks (…_rank, 0 = not in that list) best = longest; values in [0, 1] on an absolute
// scale; other non-negative values against the largest; fields with negative values (logits) min..max.

import {h, fmtNum} from "./dom.js";

const LABELS = {
  dense_rank: "dense rank", dense_score: "dense score", bm25_rank: "BM25 rank", bm25_score: "BM25 score",
  rrf: "fusion (RRF)", rerank: "rerank logit", relevance: "relevance", decay: "recency decay",
  recency: "recency factor", importance_weight: "importance factor", temporal: "temporal factor", final: "final",
  update: "update factor", time_intent: "time intent",
};

export const label = (name) => LABELS[name] || name.replace(/_/g, " ");

export function scales(fields, hits) {
  const out = {};
  for (const name of fields) {
    const values = hits.map((hit) => hit.breakdown[name]).filter((v) => typeof v === "number");
    const min = Math.min(0, ...values);
    const max = Math.max(0, ...values);
    let kind = "scaled";
    if (name.endsWith("_rank")) kind = "rank";
    else if (min < 0) kind = "signed";
    else if (max <= 1) kind = "unit";
    out[name] = {kind, min, max};
  }
  return out;
}

function fraction(value, scale) {
  if (typeof value !== "number") return 0;
  if (scale.kind === "rank") return value > 0 ? (scale.max - value + 1) / Math.max(1, scale.max) : 0;
  if (scale.kind === "unit") return value;
  if (scale.kind === "signed") return (value - scale.min) / Math.max(1e-12, scale.max - scale.min);
  return scale.max > 0 ? value / scale.max : 0;
}

function text(name, value, scale) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "string") return value.toLowerCase();   // time_intent: none, current, past, first
  if (scale.kind === "rank") return value > 0 ? `#${value}` : "not in list";
  return fmtNum(value, 4);
}

export function bar(fractionValue, kind = "") {
  const fill = h("span", {class: `fill ${kind}`.trim()});
  fill.style.width = `${Math.max(0, Math.min(1, fractionValue)) * 100}%`;
  return h("span", {class: "bar"}, fill);
}

export function breakdownPanel(breakdown, fields, fieldScales) {
  return h("div", {class: "breakdown", "data-test": "breakdown"}, fields.map((name) => {
    const scale = fieldScales[name];
    const value = breakdown[name];
    return h("div", {class: "bd-row", "data-field": name},
      h("span", {class: "bd-label"}, label(name)),
      bar(fraction(value, scale), `${scale.kind} ${name === "final" ? "final" : ""}`),
      h("span", {class: "bd-value"}, text(name, value, scale)));
  }));
}
