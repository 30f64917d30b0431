// The server: models and limits (Info), recency factor curves per memory type from the running config,
// and the stage latencies of recent searches from the server's own metrics.

import {get} from "../api.js";
import {h, table, fmtNum} from "../dom.js";
import {lineChart, stackedBars} from "../charts.js";

const DAY_S = 86400;

function model(info) {
  if (!info) return "none";
  return `${info.name || info.path} (${info.device || "?"}, ${info.dtype || "?"})`;
}

function halfLife(s) {
  if (!(s > 0)) return "never decays";
  return s >= DAY_S ? `half-life ${fmtNum(s / DAY_S, 1)} d` : `half-life ${fmtNum(s / 3600, 1)} h`;
}

export async function serverPage(ctx) {
  const [recency, stages] = await Promise.all([get("/api/plots/recency"), get("/api/plots/stages")]);
  const info = ctx.info;
  const curves = lineChart({x: recency.ages_s.map((s) => s / DAY_S), series: recency.curves, yMax: 1,
    xLabel: "age (days)", yLabel: "recency factor", xFormat: (d) => fmtNum(Math.round(d * 10) / 10, 1),
    ariaLabel: "recency factor by age and type"});
  const timed = stages.stages.filter((s) => s !== "total");
  const n = stages.at_ms.length;
  const latency = n ? stackedBars({labels: stages.at_ms.map((_, i) => String(i + 1)),
    series: Object.fromEntries(timed.map((s) => [s, stages.series_ms[s]])), yLabel: "ms",
    ariaLabel: "stage latencies of recent searches"}) : h("p", {class: "muted"}, "No search since the server started.");
  const summary = table(["stage", "p50 ms", "p95 ms", "mean ms"], stages.stages.filter((s) => stages.summary[s])
    .map((s) => h("tr", {"data-field": s}, h("td", {}, s), h("td", {}, fmtNum(stages.summary[s].p50_ms, 2)),
      h("td", {}, fmtNum(stages.summary[s].p95_ms, 2)), h("td", {}, fmtNum(stages.summary[s].mean_ms, 2)))),
  {class: "grid", "data-test": "stage-summary"});
  return h("section", {},
    h("h1", {}, "Server"),
    h("dl", {class: "facts"},
      h("dt", {}, "device"), h("dd", {}, info.device),
      h("dt", {}, "embedder"), h("dd", {}, model(info.embedder)),
      h("dt", {}, "reranker"), h("dd", {}, model(info.reranker)),
      h("dt", {}, "batching"), h("dd", {}, `${info.batching.enabled ? "on" : "off"}, up to ` +
        `${info.batching.max_batch_requests} queries, ${fmtNum(info.batching.max_wait_ms, 1)} ms wait`)),
    h("h2", {}, "Recency factor by age"),
    h("p", {class: "muted"}, Object.entries(recency.half_life_s).map(([t, s]) => `${t.toLowerCase()}: ${halfLife(s)}`)
      .join(" · ") + ` · floor ${recency.scoring.decay_floor}; pinned memories never decay. ` +
      "Computed by the ranking kernel's reference from the running config."),
    curves,
    h("h2", {}, `Stage latencies of the last ${n} searches`),
    h("p", {class: "muted"}, "From the server's metrics: gRPC searches and this console's, oldest first."),
    latency, n ? summary : null);
}
