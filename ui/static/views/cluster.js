// Cluster: this node's raft view (leader, term, indexes), the raft
// servers and the gossip members with their versions, side by side, and
// the namespaces' fair shares (share, recent use, factor).

import { h, replace, badge, throttle } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { subscribe } from "../lib/events.js";

export async function mount(el) {
  const load = async () => {
    const [r, m, fs] = await Promise.all([api("/v1/cluster/raft"), api("/v1/cluster/members"),
      api("/v1/namespaces/shares").catch(() => null)]); // a token without read on every namespace still sees the rest
    const pct = (x) => (100 * (x || 0)).toFixed(1) + "%";
    replace(el, h("h1", null, "Cluster"),
      h("p", { class: "muted" }, "As seen by ", h("b", null, r.node), " (" + String(r.state).toLowerCase() + "). Another node may see gossip differently."),
      h("div", { class: "grid2" },
        h("dl", { class: "kv card", id: "raft" }, [["Leader", r.leader || "none"], ["Leader address", r.leader_addr || "—"], ["Term", r.term],
          ["Commit index", r.commit_index], ["Applied index", r.applied_index], ["Last index", r.last_index], ["First index", r.first_index],
          ["Snapshot index", r.snapshot_index || "none"], ["Voters", r.voters], ["Last contact", r.last_contact || "—"]]
          .map(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
        h("section", null, h("h2", null, "Raft servers"), h("table", { id: "raft-servers" },
          h("thead", null, h("tr", null, ["ID", "Address", "Suffrage", "Role", "Last heard", ["Clients", "Client agents whose work stream the server holds (the leader counts them)"]]
            .map((x) => (Array.isArray(x) ? h("th", { title: x[1] }, x[0]) : h("th", null, x))))),
          h("tbody", null, (r.servers || []).map((s) => h("tr", { "data-role": s.role || "", "data-server": s.id }, h("td", null, s.id, s.id === r.leader ? " ★" : ""), h("td", null, s.address),
            h("td", null, s.suffrage), h("td", null, s.role || ""), h("td", null, s.last_heard_ago || ""), h("td", { class: "clients" }, s.clients ?? "—"))))))),
      h("h2", null, "Members (gossip)"),
      h("table", { id: "members" }, h("thead", null, h("tr", null, ["Name", "Gossip address", "API", "Status", "Raft role", "Voter", "Version"].map((x) => h("th", null, x)))),
        h("tbody", null, (m.members || []).map((x) => h("tr", null, h("td", null, x.name), h("td", null, x.addr), h("td", null, x.http_addr),
          h("td", null, badge(x.status)), h("td", null, x.raft_role), h("td", null, x.voter ? "yes" : "no"), h("td", null, x.version || ""))))),
      fs && h("section", null, h("h2", null, "Fair share"),
        h("p", { class: "muted" }, fs.enabled ? "On: among equal priorities the lowest factor is placed first. Recent use decays with a half-life of " + Math.round(fs.half_life_seconds / 3600 * 10) / 10 + " h."
          : "Off: no namespace sets a share (foreman namespace set NS --share N)."),
        h("table", { id: "fair-share" }, h("thead", null, h("tr", null, ["Namespace", "Share", "Normalized", "Recent use", "Live", "Factor"].map((x) => h("th", null, x)))),
          h("tbody", null, (fs.namespaces || []).map((n) => h("tr", { "data-namespace": n.name }, h("td", null, n.name), h("td", null, n.share || "—"),
            h("td", null, pct(n.normalized)), h("td", null, pct(n.recent_dominant)), h("td", null, pct(n.live_dominant)), h("td", null, (n.factor || 0).toFixed(3))))))));
  };
  const again = throttle(() => load().catch(() => {}), 1000);
  await load();
  const tick = setInterval(again, 5000); // indexes move with every entry; a slow refresh is enough
  const unsub = subscribe((ev) => { if (ev.topic === "leader" || ev.topic === "node") again(); });
  return () => { clearInterval(tick); unsub(); };
}
