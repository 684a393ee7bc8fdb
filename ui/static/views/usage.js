// Usage: what finished attempts used (GET /v1/usage), by namespace, user or
// label, with requested next to used and a chart over time.

import { h, replace } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { lines } from "../lib/chart.js";

const hours = (s) => (s / 3600).toFixed(s >= 360000 ? 0 : 3);

export async function mount(el, _params, q) {
  const by = h("select", { id: "usage-by", "aria-label": "Group by" });
  const since = h("select", { id: "usage-since", "aria-label": "Since" },
    ["1h", "24h", "7d", "30d", "90d", "365d"].map((x) => h("option", { value: x }, x)));
  since.value = q.get("since") || "30d";
  const chart = h("div", { id: "usage-chart" });
  const body = h("tbody");
  const note = h("p", { class: "muted", id: "usage-note" });
  replace(el, h("h1", null, "Usage"),
    h("p", { class: "controls" }, h("label", null, "By ", by), " ", h("label", null, "Since ", since)),
    note, chart,
    h("table", { id: "usage" }, h("thead", null, h("tr", null,
      ["Key", "Attempts", "CPU-h used", "CPU-h requested", "Used/requested", "Mem GiB-h", "Mem GiB-h requested", "GPU-h", "Wall-h"].map((x) => h("th", null, x)))), body));
  let labelsShown = false;
  const load = async () => {
    const qs = "?since=" + encodeURIComponent(since.value) + "&by=" + encodeURIComponent(by.value || "namespace");
    const step = ["1h", "24h"].includes(since.value) ? "hour" : "day";
    const [total, series] = await Promise.all([api("/v1/usage" + qs), api("/v1/usage" + qs + "&step=" + step)]);
    if (!labelsShown) {
      labelsShown = true;
      const cur = q.get("by") || "namespace";
      replace(by, ["namespace", "user", ...total.labels.map((l) => "label:" + l)].map((x) => h("option", { value: x }, x)));
      by.value = cur;
    }
    note.textContent = total.enabled ? "" : "Usage accounting is not on yet: it starts once every server runs a version with it.";
    replace(body, total.rows.length ? total.rows.map((r) => h("tr", { "data-key": r.key },
      h("td", null, r.key || "—"), h("td", null, r.usage.attempts),
      h("td", null, hours(r.cpu_seconds)), h("td", null, hours(r.cpu_requested_seconds)),
      h("td", null, r.cpu_requested_seconds > 0 ? Math.round((100 * r.cpu_seconds) / r.cpu_requested_seconds) + "%" : "—"),
      h("td", null, hours(r.memory_gib_seconds)), h("td", null, hours(r.memory_gib_seconds_requested)),
      h("td", null, hours(r.gpu_seconds)), h("td", null, hours(r.wall_seconds))))
      : h("tr", null, h("td", { colspan: 9, class: "muted" }, "No finished attempts in this range.")));
    // The chart: CPU hours used and requested per period, all keys together.
    const per = new Map();
    for (const r of series.rows) {
      const p = per.get(r.start) || { used: 0, req: 0 };
      p.used += r.cpu_seconds / 3600; p.req += r.cpu_requested_seconds / 3600;
      per.set(r.start, p);
    }
    const pts = [...per.entries()].sort((a, b) => a[0].localeCompare(b[0])).map((e) => e[1]);
    replace(chart, pts.length ? lines([
      { name: "CPU-h used", values: pts.map((p) => p.used), cls: "used" },
      { name: "CPU-h requested", values: pts.map((p) => p.req), cls: "requested" },
    ], { label: "CPU hours per " + step, unit: " h" }) : []);
  };
  const again = () => load().catch((e) => { note.textContent = "Error: " + e.message; });
  by.addEventListener("change", again);
  since.addEventListener("change", again);
  await load();
  const tick = setInterval(again, 60000);
  return () => clearInterval(tick);
}
