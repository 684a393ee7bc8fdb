// Job: spec, attempts, timeline, live log tail, result, cancel/retry.

import { h, replace, link, badge, enc, confirmDialog, toast, throttle, add } from "../lib/dom.js";
import { api, post, stream, request, ApiError, getToken } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { time, between, ago, bytes, cpu, mem, labels, dur, shellJoin } from "../lib/fmt.js";
import { logView } from "../lib/logview.js";
import { guard } from "../lib/acl.js";
import { arrayProgress, taskGrid } from "../lib/array.js";

// GRID_MAX is how many of an array's tasks the grid draws (the rest:
// foreman job ls --array).
const GRID_MAX = 2000;

const TERMINAL = new Set(["succeeded", "failed", "cancelled", "skipped"]);

// What the two times count: the job's includes waiting to be placed and
// the retries, an attempt's only its own run.
const JOB_TIME = "From submit to the end of the last attempt: waiting to be placed, every attempt and the backoff between retries (still counting while the job is live)";
const ATTEMPT_TIME = "This attempt alone: from its start to its end (still counting while it runs)";

// defaultStream is the log an attempt opens on: stderr when it failed and
// wrote there (where the error is), else stdout.
const defaultStream = (a) => (a && a.state === "failed" && a.stderr_tail ? "stderr" : "stdout");

export async function mount(el, [id]) {
  // Subscribe before the first read, keeping what arrives meanwhile: a
  // short job can finish while the page loads.
  const early = [];
  let onEvent = (ev) => early.push(ev);
  const unsub = subscribe((ev) => onEvent(ev));
  try {
    return await load(el, id, unsub, early, (fn) => { onEvent = fn; });
  } catch (e) { unsub(); throw e; }
}

async function load(el, id, unsub, early, setHandler) {
  const base = "/v1/jobs/" + enc(id);
  let d = await api(base);
  const head = h("div", { class: "head" });
  const summary = h("section", { class: "card" });
  const attempts = h("section");
  const timeline = h("ol", { class: "timeline", id: "timeline" });
  const result = h("section");
  const tasks = h("section", { id: "tasks" });
  const artifacts = h("section", { id: "artifacts" });
  const gpuUse = h("section", { id: "gpu-usage" });
  const logBox = h("section", { class: "logs" });
  const spec = h("pre", { class: "spec" });
  replace(el, head, h("div", { class: "grid2" }, summary, h("section", null, h("h2", null, "Timeline"), timeline)),
    attempts, gpuUse, tasks, logBox, result, artifacts, h("details", null, h("summary", null, "Spec (JSON)"), spec));

  const draw = () => {
    const j = d.job;
    const canCancel = !TERMINAL.has(j.state);
    const canRetry = ["failed", "cancelled", "skipped"].includes(j.state);
    replace(head,
      h("h1", { class: "jobname" }, j.spec.name || "(no name)"),
      badge(j.state),
      h("code", { class: "muted" }, j.id),
      h("span", { class: "spacer" }),
      guard(h("button", { type: "button", class: "danger", id: "cancel", disabled: !canCancel, onclick: cancel }, "Cancel"), "submit", j.spec.namespace),
      guard(h("button", { type: "button", id: "retry", disabled: !canRetry, onclick: retry }, "Retry"), "submit", j.spec.namespace));
    const s = j.spec;
    const kv = [
      ["State", h("span", { id: "job-state" }, badge(j.state))],
      ["Reason", j.reason || "—"],
      ["Attempts", j.array ? `at most ${s.max_attempts || 3} per task` : `${j.counted_attempts} counted of ${s.max_attempts || 3} (${j.attempts} made)`],
      ["Exit code", j.exit_code ?? "—"],
      ["Submitted", time(j.submitted_at)],
      ["Finished", time(j.finished_at)],
      ["Submit → finish", h("span", { id: "job-time", title: JOB_TIME }, between(j.submitted_at, j.finished_at)), JOB_TIME],
      ["Command", h("code", { id: "job-command" }, s.http ? s.http.method + " " + s.http.url : shellJoin(s.command))],
      ["Driver", s.driver || "node default"],
      ["Resources", `${cpu(s.resources?.cpu)} · ${mem(s.resources?.memory)}`],
      ["Priority", s.priority], ["Queue", s.queue || "default"],
      ["Labels", labels(s.labels) || "—"],
    ];
    if (j.gang) kv.push(["Gang", h("span", { id: "job-gang" }, `${j.gang.size} tasks · placement ${j.gang.placements || 0} · token ${j.gang.token || "—"}`,
      j.gang.stop ? " · stopping: " + j.gang.stop : "")]);
    if (j.array) {
      const x = d.array || {};
      kv.push(["Array", h("span", { id: "job-array" }, arraySpecText(s.array), ` · ${j.array.size.toLocaleString()} tasks `, arrayProgress(j.array))]);
      for (const [k, v] of [["Failed indexes", x.failed], ["Running indexes", x.running], ["Cancelled indexes", x.cancelled]]) if (v) kv.push([k, h("code", null, v)]);
    }
    if (j.array_task) kv.push(["Array task", h("span", { id: "job-array-task" }, "index " + j.array_task.index + " of ", link("jobs/" + enc(j.array_task.array), j.array_task.array))]);
    if (j.state === "running" && !j.array) kv.push(["Exec", h("code", { id: "job-exec", title: "Runs a command inside the running attempt (needs the exec permission); every exec is in the timeline" }, `foreman exec -it ${j.id} -- sh`)]);
    if (j.preemptions) kv.push(["Preempted", j.preemptions + (j.preemptions === 1 ? " time" : " times")]);
    if (j.workflow) kv.push(["Workflow", link("workflows/" + enc(j.workflow), j.workflow)]);
    if (s.schedule) kv.push(["Schedule", link("schedules/" + enc(s.schedule), s.schedule)]);
    if (s.volumes?.length) kv.push(["Volumes", h("span", { id: "job-volumes" }, s.volumes.map((v) => `${v.name} at ${v.dest}${v.read_only ? " (ro)" : ""}`).join(", "))]);
    if (s.singleton) kv.push(["Singleton", h("span", { id: "job-singleton" }, `one at a time with the other singleton jobs named “${s.name}”`)]);
    if (s.depends_on?.length) {
      // --after gives each parent its own requirement; otherwise one condition covers them all.
      const on = new Map((s.after || []).map((a) => [a.job, a.on]));
      const d = j.deps?.decision ? ` · ${j.deps.decision} by ${j.deps.decided_by}` : "";
      kv.push(["Depends on", h("span", { id: "job-deps" }, s.depends_on.map((p, i) => [i ? ", " : "", link("jobs/" + enc(p), p), on.has(p) ? ` (${on.get(p)})` : ""]),
        on.size ? "" : ` · ${s.condition || "success"}`, d)]);
    }
    replace(summary, h("dl", { class: "kv" }, kv.map(([k, v, title]) => [h("dt", title ? { title } : null, k), h("dd", null, v)])));
    if (j.array) replace(attempts);
    else replace(attempts, h("h2", null, "Attempts"), d.attempts.length ? h("table", { id: "attempts" },
      h("thead", null, h("tr", null, ["#", ...(j.gang ? ["Task"] : []), "Node", "State", "Reason", "Exit", "Started", ["Start → finish", ATTEMPT_TIME], "Peak memory", "CPU time"]
        .map((x) => (Array.isArray(x) ? h("th", { title: x[1] }, x[0]) : h("th", null, x))))),
      h("tbody", null, d.attempts.map((a) => h("tr", null,
        h("td", null, a.attempt),
        j.gang ? h("td", { class: "task" }, a.task ? String(a.task.index) : "—") : null,
        h("td", null, a.node ? link("nodes/" + enc(a.node), a.node) : "—"),
        h("td", null, badge(a.state)),
        h("td", { class: a.oom || a.reason === "timeout" ? "bad" : "" }, a.oom ? "OOM killed" : a.reason || "", a.signal ? " (" + a.signal + ")" : "", a.warning ? " ⚠ " + a.warning : ""),
        h("td", null, a.exit_code ?? "—"),
        h("td", null, time(a.started_at)),
        h("td", { class: "attempt-time", title: ATTEMPT_TIME }, a.started_at ? between(a.started_at, a.finished_at) : "—"),
        h("td", null, a.peak_memory_bytes ? bytes(a.peak_memory_bytes) : "—"),
        h("td", null, a.cpu_time_ns ? dur(a.cpu_time_ns / 1e6) : "—"))))) : h("p", { class: "muted" }, "Not placed yet."));
    const last = d.attempts.filter((a) => a.result).pop();
    replace(result, last ? [h("h2", null, "Result (attempt " + last.attempt + ")"),
      h("pre", { class: "result" }, resultText(last.result)),
      h("button", { type: "button", onclick: download }, "Download result")] : "");
    spec.textContent = JSON.stringify(j.spec, null, 2);
    // Artifacts: those of the last attempt that left any (the list came
    // with its finish report; the bytes are on its node and, with an
    // object store, in the store once outputs.state is stored).
    const withArt = d.attempts.filter((a) => a.artifacts?.length).pop();
    const where = (a) => !a.outputs ? "on " + a.node
      : a.outputs.state === "pending" ? "on " + a.node + "; upload to " + a.outputs.store + " pending"
      : a.outputs.state === "partial" ? "in " + a.outputs.store + " except " + (a.outputs.not_stored || []).join(", ") + "; on " + a.node
      : "in " + a.outputs.store + " and on " + a.node;
    replace(artifacts, withArt ? [h("h2", null, "Artifacts (attempt " + withArt.attempt + ", " + where(withArt) + ")"),
      h("table", { class: "artifacts" }, h("tbody", null, withArt.artifacts.map((f) => h("tr", { "data-artifact": f.path },
        h("td", null, h("code", null, f.path)), h("td", null, bytes(f.size)),
        h("td", null, h("button", { type: "button", onclick: () => fetchFile(base + "/artifacts/" + f.path.split("/").map(enc).join("/") + "?attempt=" + withArt.attempt, f.path.split("/").pop()) }, "Download")))))),
      withArt.warning ? h("p", { class: "muted" }, withArt.warning) : ""] : "");
    if (d.deliveries?.length) {
      add(result, h("h2", null, "Webhook deliveries"), h("table", null, h("tbody", null, d.deliveries.map((x) =>
        h("tr", null, h("td", null, x.event?.type), h("td", null, x.url || ""), h("td", null, badge(x.state)), h("td", null, x.attempts + " tries"), h("td", null, x.last_status ?? x.last_error ?? ""))))));
    }
  };
  async function cancel() {
    if (!(await confirmDialog("Cancel this job?", h("p", null, "A running attempt is killed.")))) return;
    try { d = await post(base + "/cancel"); draw(); toast("Cancel requested"); } catch (e) { toast(e.message, "error"); }
  }
  async function retry() {
    try { d = await post(base + "/retry"); draw(); toast("Queued again"); } catch (e) { toast(e.message, "error"); }
  }
  const download = () => fetchFile(base + "/result", (d.job.spec.name || d.job.id) + ".result");

  // Gang tasks: one row per task with its latest attempt.
  let tasksKey = "";
  const loadTasks = async () => {
    if (d.job.array) return loadArrayTasks();
    if (!d.job.spec.gang) return;
    const key = d.job.state + "/" + d.attempts.map((a) => a.attempt + a.state).join(",");
    if (key === tasksKey) return;
    tasksKey = key;
    const t = await api(base + "/tasks").catch(() => null);
    if (!t) return;
    replace(tasks, h("h2", null, "Gang tasks (" + t.size + ")"), h("table", { id: "gang-tasks" },
      h("thead", null, h("tr", null, ["Task", "Attempt", "Node", "State", "Exit", "Counted", "Port"].map((x) => h("th", null, x)))),
      h("tbody", null, t.tasks.map((k) => h("tr", { "data-task": k.index },
        h("td", null, k.index), h("td", null, k.latest ? "#" + k.latest.attempt : "—"),
        h("td", null, k.latest?.node ? link("nodes/" + enc(k.latest.node), k.latest.node) : "—"),
        h("td", { class: "state" }, k.latest ? badge(k.latest.state) : badge("waiting")),
        h("td", null, k.latest?.exit_code ?? "—"), h("td", null, k.counted), h("td", null, k.latest?.task?.port || "—"))))));
  };

  // Array tasks: a grid of the first GRID_MAX indexes, read in pages of
  // 500 (every read after an event of the array or one of its tasks).
  const loadArrayTasks = async () => {
    const a = d.job.array;
    const key = [a.next, a.queued, a.live, a.succeeded, a.failed, a.cancelled].join(",");
    if (key === tasksKey) return;
    tasksKey = key;
    const got = [];
    let cursor = "";
    do {
      const p = new URLSearchParams({ array: id, limit: 500 });
      if (cursor) p.set("cursor", cursor);
      const page = await api("/v1/jobs?" + p).catch(() => null);
      if (!page) return;
      got.push(...page.jobs); cursor = page.next_cursor || "";
    } while (cursor && got.length < GRID_MAX);
    replace(tasks, h("h2", null, `Tasks (${a.size.toLocaleString()})`), taskGrid(d.job, got, GRID_MAX),
      h("p", { class: "muted" }, a.size > GRID_MAX ? `The first ${GRID_MAX.toLocaleString()} indexes. ` : "",
        "Every task: foreman job ls --array " + id + "; one task's output: foreman logs " + id + " --index N"));
  };

  // GPU use of the live attempts holding GPUs, measured by their nodes
  // (GET …/gpu-usage, proxied there; a sample at most 5 s old): read now
  // and every 5 s while one runs.
  // At most GPU_USE_MAX attempts (a large gang: the rest in job status),
  // and an event re-reads only when the set of attempts changed.
  const GPU_USE_MAX = 16;
  let gpuKey = ""; let gpuAt = 0;
  const loadGPUUse = async (timer) => {
    const live = d.attempts.filter((a) => (a.state === "assigned" || a.state === "running") && (a.gpus?.length || a.gpu_share));
    if (!live.length) { gpuKey = ""; replace(gpuUse); return; }
    const key = live.map((a) => a.attempt + a.state).join(",");
    if (!timer && key === gpuKey && Date.now() - gpuAt < 4000) return;
    gpuKey = key; gpuAt = Date.now();
    const rows = []; const notes = [];
    if (live.length > GPU_USE_MAX) notes.push(`${live.length - GPU_USE_MAX} more attempts not shown: foreman job status ${id}`);
    for (const a of live.slice(0, GPU_USE_MAX)) {
      try {
        const u = await api(base + "/gpu-usage?attempt=" + a.attempt);
        for (const g of u.devices) rows.push(h("tr", { "data-uuid": g.uuid },
          h("td", null, u.attempt), h("td", null, link("nodes/" + enc(u.node), u.node)), h("td", null, g.index),
          h("td", null, h("code", null, g.uuid)),
          h("td", { class: "gpu-mem" }, g.memory_bytes != null ? bytes(g.memory_bytes) : "—"),
          h("td", { class: "gpu-sm" }, g.sm_ratio != null ? Math.round(g.sm_ratio * 100) + "%" : "—")));
        if (u.note) notes.push("attempt " + u.attempt + ": " + u.note);
      } catch (e) { notes.push("attempt " + a.attempt + ": " + e.message); }
    }
    replace(gpuUse, h("h2", null, "GPU use"), rows.length ? h("table", { id: "gpu-use" },
      h("thead", null, h("tr", null, ["Attempt", "Node", "GPU", "UUID", "Memory", "SM"].map((x) => h("th", null, x)))),
      h("tbody", null, rows)) : "", notes.map((n) => h("p", { class: "muted" }, n)));
  };
  const gpuTimer = setInterval(() => { if (!TERMINAL.has(d.job.state)) loadGPUUse(true); }, 5000);

  // Timeline: the stored events, then live ones.
  const seen = new Set();
  const addEvent = (ev) => {
    if (seen.has(ev.id)) return;
    seen.add(ev.id);
    timeline.append(h("li", { class: "ev-" + ev.type.replace(/\W/g, "-") },
      h("time", { datetime: ev.at, title: ev.at }, time(ev.at)), " ",
      h("b", null, ev.type), ev.attempt ? " #" + ev.attempt : "", ev.node ? " on " + ev.node : "",
      ev.reason ? h("span", { class: "muted" }, " — " + ev.reason) : ""));
  };
  const tl = await api(base + "/events").catch(() => ({ events: [] }));
  (tl.events || []).forEach(addEvent);

  // Logs: follow the latest attempt; a new attempt starts a new tail.
  const log = logView();
  const streamSel = h("select", { "aria-label": "Stream" }, h("option", { value: "stdout" }, "stdout"), h("option", { value: "stderr" }, "stderr"));
  const attemptSel = h("select", { "aria-label": "Attempt" });
  const logState = h("span", { class: "muted", id: "log-state" });
  replace(logBox, h("div", { class: "head" }, h("h2", null, "Log"), streamSel, attemptSel, logState), log.el);
  logBox.hidden = !!d.job.array; // an array has no attempt of its own: its tasks' logs are on their pages
  let tail = null; let tailKey = ""; let tailRunning = false; let tailFollowed = false;
  let streamPicked = false; // the user chose a stream: keep it
  const fillAttempts = () => {
    const cur = attemptSel.value;
    replace(attemptSel, d.attempts.map((a) => h("option", { value: a.attempt }, "attempt " + a.attempt)));
    attemptSel.value = cur && d.attempts.some((a) => String(a.attempt) === cur) ? cur : String(d.attempts.length ? d.attempts[d.attempts.length - 1].attempt : "");
  };
  const startTail = (force) => {
    const n = attemptSel.value;
    if (!n) { logState.textContent = "waiting for the job to be placed…"; return; }
    const a0 = d.attempts.find((x) => String(x.attempt) === n);
    if (!streamPicked) streamSel.value = defaultStream(a0);
    const key = n + "/" + streamSel.value;
    const live0 = a0 && (a0.state === "assigned" || a0.state === "running");
    // Same attempt and stream: restart only when the tail ended while the
    // attempt still runs (it was read before the attempt started).
    if (key === tailKey && !force && (tailRunning || !live0 || tailFollowed)) return;
    if (tail) tail.abort();
    tailKey = key; tail = new AbortController();
    log.clear();
    const a = d.attempts.find((x) => String(x.attempt) === n);
    const live = a && (a.state === "assigned" || a.state === "running");
    logState.textContent = live ? "following…" : "";
    const ctl = tail;
    tailRunning = true; tailFollowed = !!live && a.state === "running";
    stream(`${base}/logs?attempt=${n}&stream=${streamSel.value}${live ? "&follow=true" : ""}`, (c) => log.write(c), ctl.signal)
      .then(() => { if (!ctl.signal.aborted) { tailRunning = false; log.end(); logState.textContent = "end of log"; } })
      .catch((e) => { if (!ctl.signal.aborted) { tailRunning = false; log.end(); logState.textContent = e instanceof ApiError ? e.message : "log stream ended: " + e.message; } });
  };
  streamSel.addEventListener("change", () => { streamPicked = true; startTail(); });
  attemptSel.addEventListener("change", () => startTail());

  draw(); fillAttempts(); startTail(); loadTasks(); loadGPUUse();

  const reload = throttle(async () => {
    try {
      const wasLast = attemptSel.value === String(d.attempts.length ? d.attempts[d.attempts.length - 1].attempt : "");
      d = await api(base); draw(); fillAttempts(); loadTasks(); loadGPUUse();
      if (wasLast && d.attempts.length) attemptSel.value = String(d.attempts[d.attempts.length - 1].attempt);
      startTail();
    } catch (e) { if (e.status === 404) replace(head, h("h1", null, "Job " + id + " is gone (garbage-collected)")); }
  }, 300);
  const handle = (ev) => {
    if (ev.type === "reset") { reload(); return; }
    if (d.job.array && ev.job_id?.startsWith(id + ".")) { reload(); return; } // one of its tasks moved
    if (ev.job_id !== id) return;
    addEvent(ev);
    reload();
  };
  setHandler(handle);
  early.splice(0).forEach(handle);
  return () => { unsub(); clearInterval(gpuTimer); if (tail) tail.abort(); };
}

/** fetchFile downloads path: a plain link when no token is needed (the
 * browser streams it to disk), else fetched with the token into a blob. */
async function fetchFile(path, name) {
  let url = path, blob = false;
  if (getToken()) {
    const r = await request(path);
    if (!r.ok) { toast("Download refused: " + r.status + " " + (await r.text()).slice(0, 200), "error"); return; }
    url = URL.createObjectURL(await r.blob()); blob = true;
  }
  const a = h("a", { href: url, download: name || "download" });
  document.body.append(a); a.click(); a.remove();
  if (blob) setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function arraySpecText(a) {
  return `${a.start}-${a.end}` + (a.step > 1 ? ":" + a.step : "") + (a.parallel ? "%" + a.parallel : "");
}

function resultText(b64) {
  try {
    const bin = atob(b64);
    const u8 = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const t = new TextDecoder("utf-8", { fatal: false }).decode(u8);
    return t.length > 65536 ? t.slice(0, 65536) + "\n…" : t;
  } catch { return "(binary)"; }
}
