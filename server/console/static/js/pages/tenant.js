// One tenant: counts by type × status, registry state, and memories created over time by type.

import {get} from "../api.js";
import {h, table, tenantHref, fmtAge, fmtTime, fmtBytes, fmtNum} from "../dom.js";
import {stackedBars} from "../charts.js";

function bucketLabel(ms, width) {
  const iso = new Date(ms).toISOString();
  return width < 86400000 ? iso.slice(5, 13).replace("T", " ") + "h" : iso.slice(0, 10);
}

export async function tenantPage(ctx, tenant) {
  const s = await get("/api/tenant", {tenant});
  const statuses = Object.keys(s.by_status);
  const types = Object.keys(s.by_type);
  const grid = table(["type", ...statuses.map((x) => x.toLowerCase()), "all"],
    [...types.map((t) => h("tr", {}, h("th", {}, t.toLowerCase()),
      statuses.map((st) => h("td", {"data-field": `${t}.${st}`}, s.by_type_status[t][st])),
      h("td", {"data-field": `${t}.all`}, s.by_type[t]))),
    h("tr", {class: "sum"}, h("th", {}, "all"), statuses.map((st) => h("td", {"data-field": `all.${st}`}, s.by_status[st])),
      h("td", {"data-field": "all.all"}, s.total))], {class: "grid", "data-test": "counts"});
  const stats = s.stats;
  const facts = h("dl", {class: "facts"},
    h("dt", {}, "memories"), h("dd", {"data-field": "total"}, s.complete ? String(s.total) :
      `first ${s.total} by id read (of more; the summary stops at ${s.scan_limit})`),
    h("dt", {}, "pinned"), h("dd", {}, String(s.pinned)),
    h("dt", {}, "last activity"), h("dd", {}, `${fmtAge(s.last_activity_ms)} (${fmtTime(s.last_activity_ms)})`),
    stats ? [h("dt", {}, "state"), h("dd", {}, stats.state),
      h("dt", {}, "index tier"), h("dd", {"data-field": "dense_tier"}, stats.dense_tier || "—"),
      h("dt", {}, "index"), h("dd", {}, stats.dense_index || "—"),
      h("dt", {}, "memory use"), h("dd", {}, fmtBytes(stats.ram_bytes)),
      h("dt", {}, "load time"), h("dd", {}, `${fmtNum(stats.load_ms, 1)} ms`),
      stats.replica ? [h("dt", {}, "replica"), h("dd", {"data-field": "replica"}, stats.replica)] : []] :
      [h("dt", {}, "index, memory use"), h("dd", {class: "muted"}, s.stats_note)]);
  const tl = s.timeline;
  const chart = tl.starts_ms.length ? stackedBars({labels: tl.starts_ms.map((ms) => bucketLabel(ms, tl.bucket_ms)),
    series: tl.series, yLabel: "memories created", ariaLabel: "memories over time by type"}) :
    h("p", {class: "muted"}, "No memories yet.");
  return h("section", {},
    h("h1", {}, tenant),
    h("div", {class: "cols"}, h("div", {}, h("h2", {}, "Counts"), grid), h("div", {}, h("h2", {}, "Tenant"), facts)),
    h("h2", {}, "Memories over time, by type"),
    h("p", {class: "muted"}, `Created per ${tl.bucket_ms >= 86400000 ? tl.bucket_ms / 86400000 + " day(s)" :
      tl.bucket_ms / 3600000 + " hour(s)"}, every status.`),
    chart,
    h("p", {}, h("a", {href: tenantHref(tenant, "search")}, "Search playground →"), " ",
      h("a", {href: tenantHref(tenant, "pending")}, `Pending (${s.by_status.PENDING ?? 0}) →`)));
}
