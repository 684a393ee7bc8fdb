// Nodes: capacity vs allocated, labels, drivers, drain and eligibility.

import { h, replace, link, badge, enc, confirmDialog, toast, throttle } from "../lib/dom.js";
import { api, post } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { bar } from "../lib/chart.js";
import { cpu, mem, labels, ago } from "../lib/fmt.js";
import { guard } from "../lib/acl.js";
import { go } from "../app.js";

export function nodeActions(n, after) {
  const name = n.name;
  const drain = async () => {
    if (!(await confirmDialog("Drain " + name + "?", h("p", null, "No new attempts are placed on it; running ones finish (no deadline).") , "Drain"))) return;
    try { await post("/v1/nodes/" + enc(name) + "/drain", {}); toast(name + " is draining"); after && after(); } catch (e) { toast(e.message, "error"); }
  };
  // A client the leader still counts alive (the mass-silence guard may be
  // holding its death): the operator declares it down (foreman node down).
  const down = async () => {
    if (!(await confirmDialog("Declare " + name + " down?", h("p", null, "It is committed dead now; its jobs rerun elsewhere once their lease has run out since the leader last heard it. If it is in fact beating, the leader marks it alive again."), "Declare down"))) return;
    try { await post("/v1/nodes/" + enc(name) + "/down"); toast(name + " declared down"); after && after(); } catch (e) { toast(e.message, "error"); }
  };
  const elig = (v) => async () => {
    try { await post("/v1/nodes/" + enc(name) + "/eligibility", { eligibility: v }); toast(name + ": " + v); after && after(); } catch (e) { toast(e.message, "error"); }
  };
  return h("span", { class: "actions" },
    n.role === "client" && n.gossip !== "dead" && n.gossip !== "left"
      ? guard(h("button", { type: "button", class: "danger", "data-action": "down", onclick: down }, "Declare down"), "operator") : "",
    guard(h("button", { type: "button", class: "danger", "data-action": "drain", disabled: n.eligibility === "draining", onclick: drain }, "Drain"), "operator"),
    guard(n.eligibility === "eligible"
      ? h("button", { type: "button", "data-action": "ineligible", onclick: elig("ineligible") }, "Make ineligible")
      : h("button", { type: "button", "data-action": "eligible", onclick: elig("eligible") }, "Make eligible"), "operator"));
}

// capacityBars: allocated (what live attempts requested) and, when the node
// measured it, used (what its jobs use now) against the capacity.
export function capacityBars(n, u) {
  const c = n.capacity || {}, a = n.allocated || {};
  const usedCPU = u && u.cpuM != null ? bar(u.cpuM, c.cpu || 0, "used " + cpu(Math.round(u.cpuM))) : null;
  const usedMem = u && u.memMB != null ? bar(u.memMB, c.memory || 0, "used " + mem(Math.round(u.memMB))) : null;
  if (usedCPU) usedCPU.classList.add("used", "used-cpu");
  if (usedMem) usedMem.classList.add("used", "used-mem");
  return h("div", { class: "bars" },
    bar(a.cpu || 0, c.cpu || 0, "CPU " + cpu(a.cpu || 0) + " / " + cpu(c.cpu || 0) + " allocated"), usedCPU,
    bar(a.memory || 0, c.memory || 0, "Memory " + mem(a.memory || 0) + " / " + mem(c.memory || 0) + " allocated"), usedMem,
    gpuBar(n),
    n.slots ? bar(n.running || 0, n.slots, "Slots " + (n.running || 0) + " / " + n.slots) : "",
    u && u.none ? h("small", { class: "muted" }, "used: not measured (no jobs cgroup)") : "");
}

// gpuBar: GPUs allocated against the node's gpu capacity, with the model
// when its detected devices share one ("" for a node without GPUs).
function gpuBar(n) {
  const c = (n.capacity?.named || {}).gpu || 0, a = (n.allocated?.named || {}).gpu || 0;
  const gpus = n.gpus || [];
  if (!c && !gpus.length) return "";
  const models = [...new Set(gpus.map((g) => (g.model || "").replace(/^NVIDIA /, "")))];
  const model = models.length === 1 && models[0] ? " " + models[0] : models.length > 1 ? " (mixed)" : "";
  const unhealthy = gpus.filter((g) => g.health).length;
  const b = bar(a, c, "GPUs " + a + " / " + c + model + " allocated" + (unhealthy ? " · " + unhealthy + " unhealthy" : ""));
  b.classList.add("gpu");
  return b;
}

// usageReader polls GET /v1/nodes/{name}/usage (each node measures its own
// jobs cgroup; not in the event stream) and turns the CPU counter into a
// rate (millicores) from consecutive readings.
export function usageReader() {
  const last = new Map(); // name -> {cpu, at}
  const now = new Map();  // name -> {cpuM, memMB, none}
  return {
    get: (name) => now.get(name),
    async read(names) {
      await Promise.all(names.slice(0, 100).map(async (name) => {
        let r;
        try { r = await api("/v1/nodes/" + enc(name) + "/usage"); } catch { now.delete(name); return; }
        const at = Date.parse(r.at), prev = last.get(name), cur = now.get(name) || {};
        const u = { memMB: r.memory_bytes != null ? r.memory_bytes / (1 << 20) : null, cpuM: cur.cpuM ?? null };
        if (r.cpu_seconds_total != null) {
          if (prev && at > prev.at) u.cpuM = Math.max(0, (r.cpu_seconds_total - prev.cpu) / ((at - prev.at) / 1000) * 1000);
          last.set(name, { cpu: r.cpu_seconds_total, at });
        }
        u.none = r.memory_bytes == null && r.cpu_seconds_total == null;
        now.set(name, u);
      }));
    },
  };
}

// silenceBanner says, while the leader holds the deaths of silent clients
// (GET /v1/nodes' summary.by_state.silent), how many and since when, and
// what the operator can do; "" otherwise. nodes: those listed (for the
// earliest silent_since).
export function silenceBanner(summary, nodes) {
  const n = summary?.by_state?.silent || 0;
  if (!n) return "";
  const since = (nodes || []).map((x) => x.silent_since).filter(Boolean).sort()[0];
  return h("p", { class: "banner", id: "silence-banner", role: "alert" },
    `${n} client${n === 1 ? "" : "s"} silent${since ? " since " + new Date(since).toLocaleTimeString() : ""}, their deaths held: `,
    "too many fell silent at once for the leader to trust it. Check the servers' network, or declare them down (foreman node down NAME).");
}

const ROLES = ["", "server", "replica", "client"];
const STATES = ["", "alive", "suspect", "silent", "dead", "left"];
const PAGE = 200;

// mount: a summary of every node (by role and state), filters (role,
// state, name prefix) and a page of PAGE nodes at a time, so the page
// stays usable with thousands of clients.
export async function mount(el, _params, q) {
  q = q || new URLSearchParams();
  const f = { role: q.get("role") || "", state: q.get("state") || "", name: q.get("name") || "" };
  const cursor = q.get("cursor") || "";
  const back = (q.get("back") || "").split(".").filter(Boolean); // cursors of the previous pages
  const roleSel = h("select", { name: "role", "aria-label": "Role" }, ROLES.map((r) => h("option", { value: r, selected: r === f.role }, r || "any role")));
  const stateSel = h("select", { name: "state", "aria-label": "State" }, STATES.map((x) => h("option", { value: x, selected: x === f.state }, x || "any state")));
  const name = h("input", { type: "search", name: "name", placeholder: "name starts with…", value: f.name, "aria-label": "Name prefix" });
  const form = h("form", { class: "filters", role: "search" }, roleSel, stateSel, name, h("button", { type: "submit" }, "Filter"));
  const query = (extra) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...f, ...extra })) if (v) p.set(k, v);
    const x = p.toString();
    return "/ui/nodes" + (x ? "?" + x : "");
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    Object.assign(f, { role: roleSel.value, state: stateSel.value, name: name.value.trim() });
    go(query({}));
  });
  roleSel.addEventListener("change", () => form.requestSubmit());
  stateSel.addEventListener("change", () => form.requestSubmit());

  const body = h("tbody");
  const summary = h("p", { id: "node-summary" });
  const banner = h("div");
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  replace(el, h("h1", null, "Nodes"), banner, summary, form, h("p", { class: "muted" }, "Allocated is what live attempts requested (a job that requests nothing is placed as 100m / 64 MiB)."),
    h("table", { id: "nodes" }, h("thead", null, h("tr", null, ["Node", "Role", "Gossip", "Eligibility", "Capacity vs allocated vs used", "Running", "Drivers", "Labels", "Version", ""].map((x) => h("th", null, x)))), body), pager);
  const usage = usageReader();
  let list = [];
  const drawUsage = () => {
    for (const n of list) {
      const cell = body.querySelector(`tr[data-node="${CSS.escape(n.name)}"] td.capcell`);
      if (cell) replace(cell, capacityBars(n, usage.get(n.name)));
    }
  };
  const drawSummary = (sm) => {
    const byState = ["alive", "suspect", "silent", "dead", "left"].filter((x) => sm.by_state[x]).map((x) => h("span", { class: "state-count" }, badge(x), " " + sm.by_state[x]));
    replace(summary, h("strong", null, sm.total + " nodes"), ": " + (sm.by_role.server || 0) + " servers, " + (sm.by_role.replica ? sm.by_role.replica + " replicas, " : "") + (sm.by_role.client || 0) + " clients · ", ...byState);
  };
  const load = async () => {
    const p = new URLSearchParams({ limit: PAGE });
    for (const k of ["role", "state", "name"]) if (f[k]) p.set(k, f[k]);
    if (cursor) p.set("cursor", cursor);
    const l = await api("/v1/nodes?" + p);
    list = l.nodes;
    drawSummary(l.summary);
    replace(banner, silenceBanner(l.summary, l.nodes));
    replace(body, l.nodes.map((n) => h("tr", { "data-node": n.name },
      h("td", null, link("nodes/" + enc(n.name), n.name), h("div", { class: "muted small" }, n.http_addr)),
      h("td", { class: "role nowrap" }, n.role || "server"),
      h("td", null, badge(n.gossip), h("div", { class: "muted small" }, ago(n.state_changed_at))),
      h("td", { class: "elig" }, badge(n.eligibility), n.drain_deadline ? h("div", { class: "small" }, "until " + n.drain_deadline) : ""),
      h("td", { class: "capcell" }, capacityBars(n, usage.get(n.name))),
      h("td", null, n.running),
      h("td", null, (n.drivers || []).join(", ")),
      h("td", { class: "labels" }, labels(n.labels)),
      h("td", { class: "nowrap" }, n.version || ""),
      h("td", null, nodeActions(n, () => again())))));
    const prev = back[back.length - 1];
    replace(pager,
      cursor ? h("a", { href: query({ cursor: prev === "_" ? "" : prev, back: back.slice(0, -1).join(".") }), "data-link": true, rel: "prev" }, "← Previous") : h("span", { class: "muted" }, "← Previous"),
      cursor ? h("a", { href: query({}), "data-link": true }, "First page") : "",
      l.next_cursor ? h("a", { href: query({ cursor: l.next_cursor, back: [...back, cursor || "_"].join(".") }), "data-link": true, rel: "next" }, "Next →") : h("span", { class: "muted" }, "Next →"));
  };
  // A fleet's node and attempt events come by the thousand: redraw at most
  // every 2 s.
  const again = throttle(() => load().catch(() => {}), 2000);
  await load();
  // Used: a first reading now, the second soon after (a CPU rate needs
  // two), then every 5 s. Clients serve no usage (their servers cannot
  // ask them): only servers are read.
  let timer = 0, gone = false;
  const poll = async (next) => {
    await usage.read(list.filter((n) => n.gossip === "alive" && n.role !== "client").map((n) => n.name));
    if (gone) return;
    drawUsage();
    timer = setTimeout(() => poll(5000), next);
  };
  poll(1500);
  const unsub = subscribe((ev) => {
    if (ev.topic === "node" || ev.type === "reset" || ev.type === "attempt.placed" || /^attempt\.(succeeded|failed|lost|killed)$/.test(ev.type)) again();
  });
  return () => { gone = true; clearTimeout(timer); unsub(); };
}
