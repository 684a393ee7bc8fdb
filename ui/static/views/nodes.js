// Nodes: capacity vs allocated, labels, drivers, drain and eligibility.

import { h, replace, link, badge, enc, confirmDialog, toast, throttle } from "../lib/dom.js";
import { api, post } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { bar } from "../lib/chart.js";
import { cpu, mem, labels, ago } from "../lib/fmt.js";
import { guard } from "../lib/acl.js";

export function nodeActions(n, after) {
  const name = n.name;
  const drain = async () => {
    if (!(await confirmDialog("Drain " + name + "?", h("p", null, "No new attempts are placed on it; running ones finish (no deadline).") , "Drain"))) return;
    try { await post("/v1/nodes/" + enc(name) + "/drain", {}); toast(name + " is draining"); after && after(); } catch (e) { toast(e.message, "error"); }
  };
  const elig = (v) => async () => {
    try { await post("/v1/nodes/" + enc(name) + "/eligibility", { eligibility: v }); toast(name + ": " + v); after && after(); } catch (e) { toast(e.message, "error"); }
  };
  return h("span", { class: "actions" },
    guard(h("button", { type: "button", class: "danger", "data-action": "drain", disabled: n.eligibility === "draining", onclick: drain }, "Drain"), "operator"),
    guard(n.eligibility === "eligible"
      ? h("button", { type: "button", "data-action": "ineligible", onclick: elig("ineligible") }, "Make ineligible")
      : h("button", { type: "button", "data-action": "eligible", onclick: elig("eligible") }, "Make eligible"), "operator"));
}

export function capacityBars(n) {
  const c = n.capacity || {}, a = n.allocated || {};
  return h("div", { class: "bars" },
    bar(a.cpu || 0, c.cpu || 0, "CPU " + cpu(a.cpu || 0) + " / " + cpu(c.cpu || 0)),
    bar(a.memory || 0, c.memory || 0, "Memory " + mem(a.memory || 0) + " / " + mem(c.memory || 0)),
    n.slots ? bar(n.running || 0, n.slots, "Slots " + (n.running || 0) + " / " + n.slots) : "");
}

export async function mount(el) {
  const body = h("tbody");
  replace(el, h("h1", null, "Nodes"), h("p", { class: "muted" }, "Allocated is what live attempts requested (a job that requests nothing is placed as 100m / 64 MiB)."),
    h("table", { id: "nodes" }, h("thead", null, h("tr", null, ["Node", "Gossip", "Eligibility", "Capacity vs allocated", "Running", "Drivers", "Labels", "Version", ""].map((x) => h("th", null, x)))), body));
  const load = async () => {
    const l = await api("/v1/nodes");
    replace(body, l.nodes.map((n) => h("tr", { "data-node": n.name },
      h("td", null, link("nodes/" + enc(n.name), n.name), h("div", { class: "muted small" }, n.http_addr)),
      h("td", null, badge(n.gossip), h("div", { class: "muted small" }, ago(n.state_changed_at))),
      h("td", { class: "elig" }, badge(n.eligibility), n.drain_deadline ? h("div", { class: "small" }, "until " + n.drain_deadline) : ""),
      h("td", { class: "capcell" }, capacityBars(n)),
      h("td", null, n.running),
      h("td", null, (n.drivers || []).join(", ")),
      h("td", { class: "labels" }, labels(n.labels)),
      h("td", null, n.version || ""),
      h("td", null, nodeActions(n, () => again())))));
  };
  const again = throttle(() => load().catch(() => {}), 1000);
  await load();
  return subscribe((ev) => {
    if (ev.topic === "node" || ev.type === "reset" || ev.type === "attempt.placed" || /^attempt\.(succeeded|failed|lost|killed)$/.test(ev.type)) again();
  });
}
