// Overview: jobs by state, live rates from the event stream, nodes,
// leader and recent failures.

import { h, replace, link, badge, throttle, enc } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { sparkline } from "../lib/chart.js";
import { ago, clip, dur } from "../lib/fmt.js";
import { silenceBanner } from "./nodes.js";

const STATES = ["waiting", "queued", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"];
const WINDOW = 60; // seconds of history in the charts
const TERMINAL = new Set(["job.succeeded", "job.failed", "job.cancelled", "job.skipped"]);

// Rates are kept across page changes, so coming back shows the last minute.
const series = { sub: new Map(), done: new Map(), lat: new Map() }; // second -> count / [sum, n]
const submittedAt = new Map(); // job -> submit time (ms), bounded
let collecting = false;

function collect() {
  if (collecting) return;
  collecting = true;
  subscribe((ev) => {
    if (ev.topic !== "job") return;
    const t = ev.at ? Date.parse(ev.at) : Date.now();
    const sec = Math.floor(Date.now() / 1000);
    if (ev.type === "job.submitted") {
      series.sub.set(sec, (series.sub.get(sec) || 0) + 1);
      submittedAt.set(ev.job_id, t);
      if (submittedAt.size > 50000) submittedAt.delete(submittedAt.keys().next().value);
    } else if (TERMINAL.has(ev.type)) {
      series.done.set(sec, (series.done.get(sec) || 0) + 1);
    } else if (ev.type === "attempt.started" && ev.attempt === 1 && submittedAt.has(ev.job_id)) {
      const l = series.lat.get(sec) || [0, 0];
      l[0] += t - submittedAt.get(ev.job_id); l[1]++;
      series.lat.set(sec, l);
      submittedAt.delete(ev.job_id);
    }
  });
}

function window60(m, f) {
  const now = Math.floor(Date.now() / 1000);
  const out = [];
  for (let s = now - WINDOW + 1; s <= now; s++) out.push(f(m.get(s)));
  for (const k of m.keys()) if (k < now - WINDOW) m.delete(k);
  return out;
}

export async function mount(el) {
  collect();
  const counts = h("div", { class: "cards", id: "counts" });
  const charts = h("div", { class: "charts" });
  const nodes = h("div", { class: "card wide", id: "nodes-summary" });
  const silence = h("div");
  const failures = h("div", { id: "failures" });
  replace(el, h("h1", null, "Overview"), silence, counts, charts,
    h("div", { class: "grid2" }, nodes, h("section", null, h("h2", null, "Recent failures"), failures)));

  const drawCharts = () => replace(charts,
    sparkline(window60(series.sub, (v) => v || 0), { label: "Submits / s" }),
    sparkline(window60(series.done, (v) => v || 0), { label: "Completions / s" }),
    sparkline(window60(series.lat, (v) => (v ? v[0] / v[1] : null)), { label: "Start latency", fmt: (v) => dur(v) }));

  const loadCounts = async () => {
    const c = await api("/v1/jobs/counts");
    replace(counts, STATES.map((st) =>
      h("a", { class: "card count s-" + st, href: "/ui/jobs?state=" + st, "data-link": true, "data-count": st },
        h("span", null, st), h("b", null, (c.counts[st] || 0).toLocaleString()))),
    h("div", { class: "card count" }, h("span", null, "total"), h("b", { id: "total" }, c.total.toLocaleString())));
  };
  const loadNodes = async () => {
    // The raft view needs the operator role; without it the rest still shows.
    const [n, r] = await Promise.all([api("/v1/nodes"), api("/v1/cluster/raft").catch((e) => ({ leader: e.status === 403 ? "(needs the operator role)" : "unknown", term: "—", applied_index: "—" }))]);
    const list = n.nodes || [];
    const up = list.filter((x) => x.gossip === "alive").length;
    replace(silence, silenceBanner(n.summary, list));
    replace(nodes, h("h2", null, "Cluster"),
      h("dl", { class: "kv" },
        h("dt", null, "Leader"), h("dd", { id: "leader" }, r.leader || "none (election in progress)"),
        h("dt", null, "Term"), h("dd", null, r.term),
        h("dt", null, "Nodes up"), h("dd", null, h("b", null, up + " / " + list.length),
          list.length - up ? h("span", { class: "bad" }, "  " + (list.length - up) + " down") : ""),
        h("dt", null, "Running"), h("dd", null, list.reduce((a, x) => a + (x.running || 0), 0) + " attempts"),
        h("dt", null, "Applied index"), h("dd", null, r.applied_index)),
      h("ul", { class: "chips" }, list.map((x) => h("li", null, link("nodes/" + enc(x.name), x.name), " ", badge(x.gossip), x.eligibility !== "eligible" ? badge(x.eligibility) : ""))));
  };
  const loadFailures = async () => {
    const f = await api("/v1/jobs?state=failed&limit=8");
    if (!f.jobs.length) { replace(failures, h("p", { class: "muted" }, "No failed jobs.")); return; }
    replace(failures, h("table", null,
      h("thead", null, h("tr", null, h("th", null, "Job"), h("th", null, "Reason"), h("th", null, "Finished"))),
      h("tbody", null, f.jobs.map((j) => h("tr", null,
        h("td", null, link("jobs/" + enc(j.id), j.spec.name || j.id)),
        h("td", { title: j.reason }, clip(j.reason, 80)),
        h("td", null, ago(j.finished_at)))))));
  };

  await Promise.all([loadCounts(), loadNodes(), loadFailures()]);
  drawCharts();
  const tick = setInterval(drawCharts, 1000);
  const counts2 = throttle(() => loadCounts().catch(() => {}), 1000);
  const nodes2 = throttle(() => loadNodes().catch(() => {}), 1000);
  const fail2 = throttle(() => loadFailures().catch(() => {}), 2000);
  const unsub = subscribe((ev) => {
    if (ev.type === "reset") { counts2(); nodes2(); fail2(); return; }
    if (ev.topic === "job" && ev.type.startsWith("job.")) counts2();
    if (ev.type === "job.failed") fail2();
    if (ev.topic === "node" || ev.topic === "leader" || ev.type === "attempt.placed" || TERMINAL.has(ev.type)) nodes2();
  });
  return () => { clearInterval(tick); unsub(); };
}
