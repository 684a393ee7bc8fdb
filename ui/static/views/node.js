// One node: its record and the attempts running on it.

import { h, replace, link, badge, enc, throttle } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { time, between, labels, cpu, mem } from "../lib/fmt.js";
import { nodeActions, capacityBars, usageReader } from "./nodes.js";

// gpuMemoryModes says how the node holds jobs to their VRAM shares.
const gpuMemoryModes = {
  "dmem": "dmem: the kernel caps each job at its share",
  "watchdog-report": "watchdog: a job over its share is reported",
  "watchdog-kill": "watchdog: a job over its share is reported and stopped",
};

// gpuTable lists the node's detected GPUs: what detection found, health,
// the live attempts holding each (whole, or by VRAM shares, with the MiB
// shared of the device's), and its links to the others (topo -m).
function gpuTable(n) {
  const gpus = n.gpus || [];
  if (!gpus.length) return "";
  const held = new Map(), shared = new Map();
  for (const a of n.attempts || []) {
    for (const g of a.gpus || []) held.set(g.uuid, [a]);
    const s = a.gpu_share;
    if (s) {
      held.set(s.gpu.uuid, (held.get(s.gpu.uuid) || []).concat([a]));
      shared.set(s.gpu.uuid, (shared.get(s.gpu.uuid) || 0) + s.memory_mib);
    }
  }
  return [
    h("h2", null, "GPUs (" + gpus.length + ")" + (n.gpu_driver ? " · driver " + n.gpu_driver : "") + (n.cuda_version ? " · CUDA " + n.cuda_version : "")),
    n.gpu_memory_mode ? h("p", { id: "node-gpu-memory-mode", class: "small" }, "VRAM shares: " + (gpuMemoryModes[n.gpu_memory_mode] || n.gpu_memory_mode)) : "",
    h("table", { id: "node-gpus" }, h("thead", null, h("tr", null, ["Index", "UUID", "Model", "Memory", "Shared", "Compute", "/dev", "Health", "Held by", "Links"].map((x) => h("th", null, x)))),
      h("tbody", null, gpus.map((g) => {
        const hs = held.get(g.uuid) || [];
        const sh = shared.get(g.uuid);
        return h("tr", { "data-gpu": g.uuid },
          h("td", null, g.index), h("td", { class: "mono small" }, g.uuid), h("td", null, g.model || "—"),
          h("td", null, g.memory_mib ? mem(g.memory_mib) : "—"),
          h("td", { class: "shared" }, sh ? sh + "/" + (g.memory_mib || "?") + " MiB" : "—"),
          h("td", null, g.compute || "—"), h("td", null, "nvidia" + g.minor),
          h("td", { class: "health" }, g.health ? [badge("unhealthy"), " " + g.health] : badge("healthy")),
          h("td", { class: "held" }, hs.length ? hs.flatMap((a, i) => [i ? ", " : "", link("jobs/" + enc(a.job_id), a.job_id + "/" + a.attempt)]) : "—"),
          h("td", { class: "small" }, (g.links || []).join(" ") || "—"));
      })))];
}

// attemptGPUs is an attempt's devices: whole ones by index, a share as
// index and size.
function attemptGPUs(a) {
  if (a.gpu_share) return a.gpu_share.gpu.index + ": " + mem(a.gpu_share.memory_mib) + " share";
  return (a.gpus || []).map((g) => g.index).join(", ") || "—";
}

export async function mount(el, [name]) {
  const usage = usageReader();
  let n = null;
  const capBox = h("div", { class: "card" });
  const drawCap = () => n && replace(capBox, h("h2", null, "Capacity vs allocated vs used"), capacityBars(n, usage.get(name)));
  const load = async () => {
    n = await api("/v1/nodes/" + enc(name));
    drawCap();
    replace(el,
      h("div", { class: "head" }, h("h1", null, n.name), badge(n.gossip), badge(n.eligibility), h("span", { class: "spacer" }), nodeActions(n, () => again())),
      h("div", { class: "grid2" },
        h("dl", { class: "kv card" }, [["Role", { client: "client (outside raft: heard through its work stream)", replica: "replica (raft non-voter, never promoted)" }[n.role] || "server (raft member)"],
          ["API", n.http_addr], ["Raft", n.raft_addr || "—"], ["Gossip", n.gossip_addr || "—"], ["Version", n.version || "—"],
          ["Drivers", (n.drivers || []).join(", ")], ["Labels", labels(n.labels) || "—"], ["Slots", n.slots || "unbounded"],
          ["Volumes", h("span", { id: "node-volumes" }, (n.volumes || []).map((v) => `${v.name} → ${v.path}${v.read_only ? " (ro)" : ""}`).join(", ") || "—")],
          ["State since", time(n.state_changed_at)]]
          .map(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
        capBox),
      gpuTable(n),
      h("h2", null, "Running attempts (" + (n.attempts || []).length + ")"),
      h("table", { id: "node-attempts" }, h("thead", null, h("tr", null, ["Job", "Attempt", "State", "Requested", "GPUs", "Running for"].map((x) => h("th", null, x)))),
        h("tbody", null, (n.attempts || []).map((a) => h("tr", null,
          h("td", null, link("jobs/" + enc(a.job_id), a.job_id)), h("td", null, a.attempt), h("td", null, badge(a.state)),
          h("td", null, cpu(a.resources?.cpu) + " · " + mem(a.resources?.memory)),
          h("td", { class: "gpus" }, attemptGPUs(a)),
          h("td", null, between(a.started_at || a.assigned_at)))))));
  };
  const again = throttle(() => load().catch(() => {}), 1000);
  await load();
  let timer = 0, gone = false;
  const poll = async (next) => {
    if (n && n.gossip === "alive") await usage.read([name]);
    if (gone) return;
    drawCap();
    timer = setTimeout(() => poll(5000), next);
  };
  poll(1500);
  const unsub = subscribe((ev) => { if (ev.node === name || ev.type === "reset") again(); });
  return () => { gone = true; clearTimeout(timer); unsub(); };
}
