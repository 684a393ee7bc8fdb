// Workflow: the DAG with each job's state, updated live from the events
// that carry this workflow's ID; a table of the jobs below it.

import { h, replace, link, badge, enc, confirmDialog, toast, throttle } from "../lib/dom.js";
import { api, post } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { layout, draw } from "../lib/dag.js";
import { go } from "../app.js";
import { time } from "../lib/fmt.js";
import { guard } from "../lib/acl.js";

const MAX_DRAWN = 400; // beyond this the graph is unreadable: the table is the view

export async function mount(el, [id]) {
  const base = "/v1/workflows/" + enc(id);
  let w = await api(base);
  let jobs = [...w.job_list];
  for (let from = w.next_from; from; ) { // every page (≤ 10,000 jobs)
    const p = await api(base + "?from=" + from);
    jobs.push(...p.job_list); from = p.next_from;
  }
  const head = h("div", { class: "head" });
  const graph = h("div", { class: "dagbox" });
  const body = h("tbody");
  replace(el, head, graph, h("table", { id: "wf-jobs" }, h("thead", null, h("tr", null, ["Job", "State", "Depends on", "Condition", "Decision", "Attempts", "Exit"].map((x) => h("th", null, x)))), body));
  const byID = new Map();
  const drawHead = () => replace(head, h("h1", null, w.name), badge(w.state), h("code", { class: "muted" }, w.id),
    h("span", { class: "muted" }, "submitted " + time(w.submitted_at)), h("span", { class: "spacer" }),
    guard(h("button", { type: "button", class: "danger", "data-action": "cancel", disabled: w.state !== "running", onclick: async () => {
      if (!(await confirmDialog("Cancel workflow " + w.name + "?", h("p", null, "Every job that has not finished is cancelled.")))) return;
      try { await api(base, { method: "DELETE", body: {} }); toast("Cancelling"); } catch (e) { toast(e.message, "error"); }
    } }, "Cancel"), "write", w.namespace),
    guard(h("button", { type: "button", "data-action": "retry", disabled: !["failed", "cancelled"].includes(w.state), onclick: async () => {
      try { await post(base + "/retry"); toast("Re-running failed jobs"); } catch (e) { toast(e.message, "error"); }
    } }, "Retry"), "write", w.namespace));
  const drawAll = () => {
    drawHead();
    byID.clear();
    jobs.forEach((j) => byID.set(j.id, j));
    if (jobs.length <= MAX_DRAWN) {
      const nodes = jobs.map((j) => ({ key: j.name, label: j.name, state: j.state, id: j.id, deps: j.depends_on || [] }));
      replace(graph, draw(nodes, layout(nodes), (n) => go("/ui/jobs/" + enc(n.id))));
    } else replace(graph, h("p", { class: "muted" }, `${jobs.length} jobs: too many to draw; see the table.`));
    replace(body, jobs.map((j) => h("tr", { "data-job": j.id },
      h("td", null, link("jobs/" + enc(j.id), j.name)), h("td", { class: "state" }, badge(j.state)),
      h("td", null, (j.depends_on || []).join(", ")), h("td", null, j.condition || ""),
      h("td", null, j.decision ? j.decision + " by " + j.decided_by : ""), h("td", null, j.attempts), h("td", null, j.exit_code ?? ""))));
  };
  drawAll();
  const reload = throttle(async () => {
    try {
      w = await api(base);
      const fresh = [...w.job_list];
      for (let from = w.next_from; from; ) { const p = await api(base + "?from=" + from); fresh.push(...p.job_list); from = p.next_from; }
      jobs = fresh; drawAll();
    } catch { /* keep what we show */ }
  }, 1000);
  const unsub = subscribe((ev) => {
    if (ev.type === "reset") { reload(); return; }
    if (ev.workflow !== id && !(ev.job_id && byID.has(ev.job_id))) return;
    const j = ev.job_id && byID.get(ev.job_id);
    if (j && ev.type.startsWith("job.") && ev.state) {
      j.state = ev.state; // immediate colour; the reload fills in the rest
      const g = graph.querySelector(`g[data-key="${CSS.escape(j.name)}"]`);
      if (g) g.setAttribute("class", "node s-" + ev.state);
    }
    reload();
  });
  reload(); // what changed while the page loaded
  return unsub;
}
