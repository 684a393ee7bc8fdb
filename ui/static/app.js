// The UI polls the REST API every few seconds; it has no state of its own.
const $ = (s) => document.querySelector(s);
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

async function getJSON(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return r.json();
}

async function refresh() {
  try {
    const state = $("#state").value;
    const jobs = await getJSON("/v1/jobs?limit=100" + (state ? "&state=" + state : ""));
    $("#jobs tbody").innerHTML = (jobs.jobs || []).map((j) =>
      `<tr><td><code>${esc(j.id)}</code></td><td>${esc(j.spec.name)}</td><td class="state-${esc(j.state)}">${esc(j.state)}</td>` +
      `<td>${esc(j.attempts)}</td><td>${esc(j.submitted_at)}</td><td>${esc(j.reason)}</td></tr>`).join("");
    const nodes = await getJSON("/v1/nodes");
    $("#nodes tbody").innerHTML = (nodes.nodes || []).map((n) =>
      `<tr><td>${esc(n.name)}</td><td>${esc(n.http_addr)}</td><td>${esc(n.gossip)}</td><td>${esc(n.eligibility)}</td>` +
      `<td>${esc(n.capacity.cpu)}m</td><td>${esc(n.capacity.memory)} MiB</td><td>${esc((n.drivers || []).join(", "))}</td></tr>`).join("");
    const raft = await getJSON("/v1/cluster/raft");
    $("#cluster").textContent = "leader: " + (raft.leader || "none");
  } catch (e) {
    $("#cluster").textContent = "error: " + e.message;
  }
}
$("#state").addEventListener("change", refresh);
refresh();
setInterval(refresh, 3000);
