// DOM helpers. Data only ever reaches the page as text nodes or attribute
// values (never innerHTML), so names, labels and log lines with markup in
// them show as typed.

/** h(tag, attrs, ...children): an element; strings become text nodes. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  add(el, children);
  return el;
}

const SVGNS = "http://www.w3.org/2000/svg";

/** s(tag, attrs, ...children): an SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  add(el, children);
  return el;
}

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class" && !(el instanceof SVGElement)) el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked" || k === "selected" || k === "disabled") el[k] = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

/** add appends children (nested arrays flattened; null/false skipped). */
export function add(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** replace empties el and fills it with children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

/** link to a UI path (handled by the router). */
export function link(path, ...children) {
  return h("a", { href: "/ui/" + path.replace(/^\//, ""), "data-link": true }, ...children);
}

/** enc encodes a path segment. */
export const enc = encodeURIComponent;

/** stateBadge: a job/attempt/node state as a coloured label. */
export function badge(state, extra) {
  return h("span", { class: "badge s-" + String(state || "none").replace(/[^a-z_]/g, ""), "data-state": state }, state || "—", extra);
}

/** toast shows a short message at the bottom right. */
export function toast(msg, kind = "info") {
  const t = h("div", { class: "toast " + kind, role: kind === "error" ? "alert" : "status" }, msg);
  document.getElementById("toasts").append(t);
  setTimeout(() => t.remove(), kind === "error" ? 8000 : 4000);
}

/** confirmDialog asks a yes/no question in a modal; resolves true on yes. */
export function confirmDialog(title, body, yes = "Confirm") {
  return new Promise((resolve) => {
    const d = h("dialog", { class: "confirm", "aria-labelledby": "dlg-title" },
      h("h2", { id: "dlg-title" }, title),
      h("div", null, body),
      h("form", { method: "dialog", class: "row" },
        h("button", { value: "no", type: "submit" }, "Cancel"),
        h("button", { value: "yes", type: "submit", class: "danger", "data-confirm": "yes" }, yes)));
    d.addEventListener("close", () => { resolve(d.returnValue === "yes"); d.remove(); });
    document.body.append(d);
    d.showModal();
    d.querySelector("[data-confirm]").focus();
  });
}

/** debounce runs fn at most once per ms, trailing. */
export function throttle(fn, ms) {
  let timer = null, again = false;
  return function run() {
    if (timer) { again = true; return; }
    fn();
    timer = setTimeout(() => { timer = null; if (again) { again = false; run(); } }, ms);
  };
}
