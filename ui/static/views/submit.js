// Submit a one-off job. The server validates (the same checks as the API
// and the CLI); its message names the field, which is highlighted.

import { h, replace, enc, toast } from "../lib/dom.js";
import { post } from "../lib/api.js";
import { go } from "../app.js";
import { guard, reguard } from "../lib/acl.js";

const field = (label, input, hint) => h("label", { class: "field" }, h("span", null, label), input, hint ? h("small", { class: "muted" }, hint) : "");

function pairs(text, what) {
  const out = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const i = line.indexOf("=");
    if (i <= 0) throw new Error(`${what}: want KEY=value per line (got "${line}")`);
    out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return Object.keys(out).length ? out : undefined;
}

export async function mount(el) {
  const inp = (name, attrs = {}) => h("input", { name, id: "f-" + name, ...attrs });
  const f = {
    name: inp("name", { placeholder: "nightly-report", maxlength: 200 }),
    command: h("textarea", { name: "command", id: "f-command", rows: 3, required: true, placeholder: "echo hello; sleep 1", spellcheck: "false" }),
    driver: h("select", { name: "driver", id: "f-driver" }, ["", "process", "container", ].map((d) => h("option", { value: d }, d || "node default"))),
    image: inp("image", { placeholder: "docker.io/library/alpine:3.20" }),
    cpu: inp("cpu", { placeholder: "500m" }), memory: inp("memory", { placeholder: "256MiB" }),
    priority: inp("priority", { type: "number", placeholder: "50" }),
    max_attempts: inp("max_attempts", { type: "number", placeholder: "3" }),
    timeout: inp("timeout", { placeholder: "30m" }),
    queue: inp("queue", { placeholder: "default" }),
    namespace: inp("namespace", { placeholder: "default" }),
    labels: h("textarea", { name: "labels", id: "f-labels", rows: 2, placeholder: "team=data" }),
    env: h("textarea", { name: "env", id: "f-env", rows: 2, placeholder: "MODE=full" }),
    raw: h("textarea", { name: "raw", id: "f-raw", rows: 6, placeholder: '{"command": ["echo", "hi"], "labels": {"team": "data"}}', spellcheck: "false" }),
  };
  const btn = guard(h("button", { type: "submit", class: "primary", id: "submit-btn" }, "Submit job"), "submit", "default");
  f.namespace.addEventListener("input", () => reguard(btn, f.namespace.value.trim() || "default"));
  const err = h("p", { class: "error", role: "alert", id: "submit-error", hidden: true });
  const form = h("form", { class: "submit", id: "submit-form", novalidate: true },
    h("div", { class: "formgrid" },
      field("Name", f.name), field("Command", f.command, "Run by /bin/sh -c"),
      field("Driver", f.driver), field("Image", f.image, "container driver only"),
      field("CPU", f.cpu, "500m, 0.5, 2"), field("Memory", f.memory, "256MiB, 1GiB"),
      field("Priority", f.priority, "0–100"), field("Max attempts", f.max_attempts),
      field("Timeout", f.timeout, "per attempt"), field("Queue", f.queue), field("Namespace", f.namespace),
      field("Labels", f.labels, "key=value per line"), field("Environment", f.env, "KEY=value per line")),
    h("details", null, h("summary", null, "Or paste a full job spec (JSON, as POST /v1/jobs takes; overrides the fields)"), f.raw),
    err,
    h("div", { class: "row" }, btn));
  replace(el, h("h1", null, "Submit a job"), form);

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.hidden = true;
    for (const x of form.querySelectorAll(".invalid")) x.classList.remove("invalid");
    let spec;
    try {
      if (f.raw.value.trim()) spec = JSON.parse(f.raw.value);
      else {
        spec = { command: f.command.value };
        if (f.name.value) spec.name = f.name.value;
        if (f.driver.value) spec.driver = f.driver.value;
        if (f.image.value) spec.image = f.image.value.trim();
        if (f.cpu.value || f.memory.value) spec.resources = { ...(f.cpu.value && { cpu: f.cpu.value.trim() }), ...(f.memory.value && { memory: f.memory.value.trim() }) };
        if (f.priority.value !== "") spec.priority = Number(f.priority.value);
        if (f.max_attempts.value !== "") spec.max_attempts = Number(f.max_attempts.value);
        if (f.timeout.value) spec.timeout = f.timeout.value.trim();
        if (f.queue.value) spec.queue = f.queue.value.trim();
        if (f.namespace.value.trim()) spec.namespace = f.namespace.value.trim();
        spec.labels = pairs(f.labels.value, "labels");
        spec.env = pairs(f.env.value, "env");
      }
    } catch (x) {
      err.textContent = x.message; err.hidden = false; return;
    }
    try {
      const r = await post("/v1/jobs", spec);
      toast("Submitted " + r.id);
      go("/ui/jobs/" + enc(r.id));
    } catch (x) {
      // "resources.cpu: …" → highlight the cpu input
      err.textContent = x.message; err.hidden = false;
      const m = /^(?:jobs\[\d+\]\.)?([a-z_]+)(?:\.([a-z_]+))?/.exec(x.message);
      const key = m && (f[m[2]] ? m[2] : m[1]);
      if (key && f[key]) { f[key].classList.add("invalid"); f[key].setAttribute("aria-invalid", "true"); f[key].focus(); }
    }
  });
  f.command.focus();
}
