// Jobs: server-side filters and cursor paging (a page is one index seek, so
// it stays fast with 100,000 jobs), rows updated live from the event
// stream, new jobs announced in a banner instead of moving rows under the
// pointer, and bulk cancel/retry with a confirmation.

import { h, replace, link, badge, enc, confirmDialog, toast, throttle } from "../lib/dom.js";
import { api, post } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { ago, clip, labels } from "../lib/fmt.js";
import { go } from "../app.js";
import { guard } from "../lib/acl.js";
import { arrayProgress } from "../lib/array.js";

const STATES = ["", "waiting", "queued", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"];
const PAGE = 50;

export async function mount(el, _params, q) {
  const f = { state: q.get("state") || "", queue: q.get("queue") || "", name: q.get("name") || "", label: q.get("label") || "", namespace: q.get("namespace") || "" };
  const cursor = q.get("cursor") || "";
  const back = (q.get("back") || "").split(".").filter(Boolean); // cursors of the previous pages

  const stateSel = h("select", { name: "state", "aria-label": "State" }, STATES.map((s) => h("option", { value: s, selected: s === f.state }, s || "any state")));
  const name = h("input", { type: "search", name: "name", placeholder: "name starts with…", value: f.name, "aria-label": "Name prefix" });
  const queue = h("input", { type: "text", name: "queue", placeholder: "queue", value: f.queue, size: 10, "aria-label": "Queue" });
  const label = h("input", { type: "text", name: "label", placeholder: "label k=v,k2=v2", value: f.label, size: 16, "aria-label": "Labels" });
  const ns = h("input", { type: "text", name: "namespace", placeholder: "namespace (* = all)", value: f.namespace, size: 14, "aria-label": "Namespace (default: default; * for all)" });
  const form = h("form", { class: "filters", role: "search" }, stateSel, name, ns, queue, label, h("button", { type: "submit" }, "Filter"));
  const query = (extra) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...f, ...extra })) if (v) p.set(k, v);
    const s = p.toString();
    return "/ui/jobs" + (s ? "?" + s : "");
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    Object.assign(f, { state: stateSel.value, name: name.value.trim(), queue: queue.value.trim(), label: label.value.trim(), namespace: ns.value.trim() });
    go(query({}));
  });
  stateSel.addEventListener("change", () => form.requestSubmit());

  const newBanner = h("div", { class: "notice", hidden: true, role: "status" });
  const selAll = h("input", { type: "checkbox", "aria-label": "Select all on this page" });
  const tbody = h("tbody");
  const bulk = h("div", { class: "bulk" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const info = h("span", { class: "muted" });
  replace(el, h("div", { class: "head" }, h("h1", null, "Jobs"), info), form, newBanner, bulk,
    h("table", { class: "jobs", id: "jobs" },
      h("thead", null, h("tr", null, h("th", { class: "sel" }, selAll), h("th", null, "Name"), h("th", null, "ID"), h("th", null, "State"),
        h("th", null, "Attempts"), h("th", null, "Queue"), h("th", null, "Labels"), h("th", null, "Submitted"), h("th", null, "Reason"))),
      tbody), pager);

  const rows = new Map(); // job id -> {tr, job}
  const selected = new Set();

  const t0 = performance.now();
  const p = new URLSearchParams({ limit: PAGE });
  for (const k of ["state", "queue", "name", "label", "namespace"]) if (f[k]) p.set(k, f[k]);
  if (cursor) p.set("cursor", cursor);
  const [list, counts] = await Promise.all([api("/v1/jobs?" + p), api("/v1/jobs/counts").catch(() => null)]);

  const row = (j) => {
    const cb = h("input", { type: "checkbox", "aria-label": "Select " + (j.spec.name || j.id), checked: selected.has(j.id) });
    cb.addEventListener("change", () => { cb.checked ? selected.add(j.id) : selected.delete(j.id); drawBulk(); });
    const tr = h("tr", { "data-job": j.id },
      h("td", { class: "sel" }, cb),
      h("td", { class: "name", title: j.spec.name }, link("jobs/" + enc(j.id), clip(j.spec.name || "(no name)", 80)),
        j.spec.namespace && f.namespace !== j.spec.namespace ? h("span", { class: "muted small ns" }, " · " + j.spec.namespace) : ""),
      h("td", null, h("code", null, j.id)),
      h("td", { class: "state" }, badge(j.state), j.array ? arrayProgress(j.array) : ""),
      h("td", null, j.counted_attempts + "/" + (j.spec.max_attempts || 3)),
      h("td", null, j.spec.queue || "—"),
      h("td", { class: "labels", title: labels(j.spec.labels) }, clip(labels(j.spec.labels), 40)),
      h("td", { title: j.submitted_at }, ago(j.submitted_at)),
      h("td", { class: "reason", title: j.reason || "" }, clip(j.reason || "", 60)));
    rows.set(j.id, { tr, job: j });
    return tr;
  };
  replace(tbody, list.jobs.length ? list.jobs.map(row) : h("tr", null, h("td", { colspan: 9, class: "muted" }, "No jobs match.")));
  el.dataset.renderMs = String(Math.round(performance.now() - t0)); // this view: fetch + DOM
  el.dataset.firstRender = String(Math.round(performance.now()));    // since navigation start

  const total = counts ? (f.state ? counts.counts[f.state] : counts.total) : null;
  replace(info, total != null && !f.name && !f.queue && !f.label && (!f.namespace || f.namespace === "*") ? total.toLocaleString() + " jobs" : "");

  // back holds the cursors of the newer pages ("_" = the first page).
  const prev = back.length ? back[back.length - 1] : null;
  replace(pager,
    cursor ? h("a", { href: query({ cursor: prev === "_" ? "" : prev, back: back.slice(0, -1).join(".") }), "data-link": true, rel: "prev" }, "← Newer") : h("span", { class: "muted" }, "← Newer"),
    cursor ? h("a", { href: query({}), "data-link": true }, "First page") : "",
    list.next_cursor ? h("a", { href: query({ cursor: list.next_cursor, back: [...back, cursor || "_"].join(".") }), "data-link": true, rel: "next" }, "Older →") : h("span", { class: "muted" }, "Older →"));

  // The namespace the bulk actions act in ("" = jobs of several: the server
  // checks each one).
  const bulkNS = f.namespace === "*" ? "" : f.namespace || "default";
  function drawBulk() {
    if (!selected.size) { replace(bulk); return; }
    replace(bulk, h("span", null, selected.size + " selected"),
      guard(h("button", { type: "button", class: "danger", "data-action": "bulk-cancel", onclick: () => bulkDo("cancel") }, "Cancel selected"), "submit", bulkNS),
      guard(h("button", { type: "button", "data-action": "bulk-retry", onclick: () => bulkDo("retry") }, "Retry selected"), "submit", bulkNS),
      h("button", { type: "button", onclick: () => { selected.clear(); for (const c of tbody.querySelectorAll("input[type=checkbox]")) c.checked = false; selAll.checked = false; drawBulk(); } }, "Clear"));
  }
  selAll.addEventListener("change", () => {
    for (const [id, r] of rows) { r.tr.querySelector("input").checked = selAll.checked; selAll.checked ? selected.add(id) : selected.delete(id); }
    drawBulk();
  });
  async function bulkDo(action) {
    const ids = [...selected];
    const ok = await confirmDialog(action === "cancel" ? "Cancel " + ids.length + " jobs?" : "Retry " + ids.length + " jobs?",
      h("p", null, action === "cancel" ? "Running attempts are killed. This cannot be undone (retry re-runs a job)." : "Failed, cancelled and skipped jobs are queued again with a fresh attempt budget; others are left alone."),
      action === "cancel" ? "Cancel jobs" : "Retry jobs");
    if (!ok) return;
    let done = 0; const errs = [];
    const queue = ids.slice();
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let id; (id = queue.shift());) {
        try { await post("/v1/jobs/" + enc(id) + "/" + action); done++; } catch (e) { errs.push(id + ": " + e.message); }
      }
    }));
    toast(`${action}: ${done} done` + (errs.length ? `, ${errs.length} refused (${clip(errs[0], 100)})` : ""), errs.length ? "error" : "info");
    selected.clear(); selAll.checked = false; drawBulk();
  }

  // Live: update visible rows in place; count new submits on the first page.
  let fresh = 0, stale = false;
  const showFresh = throttle(() => {
    newBanner.hidden = !fresh && !stale;
    replace(newBanner, stale ? "The event stream was reset; this list may be out of date — " :
      fresh.toLocaleString() + " new job" + (fresh === 1 ? "" : "s") + " submitted — ",
    h("a", { href: query({ cursor, back: back.join(".") }), "data-link": true }, stale ? "reload" : "show"));
  }, 500);
  const unsub = subscribe((ev) => {
    if (ev.type === "reset") { stale = true; showFresh(); return; }
    if (ev.topic !== "job" || !ev.job_id) return;
    const r = rows.get(ev.job_id);
    if (r && ev.type.startsWith("job.") && ev.state) {
      r.job.state = ev.state;
      replace(r.tr.querySelector("td.state"), badge(ev.state), r.job.array ? arrayProgress(r.job.array) : "");
      const reason = r.tr.querySelector("td.reason");
      reason.textContent = clip(ev.reason || "", 60); reason.title = ev.reason || "";
      r.tr.classList.add("flash"); setTimeout(() => r.tr.classList.remove("flash"), 600);
    }
    if (ev.type === "job.submitted" && !cursor) { fresh++; showFresh(); }
  });
  return unsub;
}
