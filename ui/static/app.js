// foreman's web UI: a small router over views (views/*.js). Each view is
// mount(el, params, query) → optional cleanup function. Routes are real
// paths under /ui/ (the agent serves index.html for every one of them), so
// a deep link like /ui/jobs/01J… works on reload.

import { h, replace, toast } from "./lib/dom.js";
import { api, onUnauthorized, setToken, getToken } from "./lib/api.js";
import * as events from "./lib/events.js";
import * as acl from "./lib/acl.js";

const routes = [
  [/^$/, "overview"],
  [/^jobs$/, "jobs"],
  [/^jobs\/([^/]+)$/, "job"],
  [/^workflows$/, "workflows"],
  [/^workflows\/([^/]+)$/, "workflow"],
  [/^schedules$/, "schedules"],
  [/^schedules\/([^/]+)$/, "schedule"],
  [/^nodes$/, "nodes"],
  [/^nodes\/([^/]+)$/, "node"],
  [/^cluster$/, "cluster"],
  [/^usage$/, "usage"],
  [/^submit$/, "submit"],
];
const navOf = { job: "jobs", workflow: "workflows", schedule: "schedules", node: "nodes" };

const main = document.getElementById("main");
let cleanup = null;
let leaving = false;
// Leaving the page ends its streams: a page kept in the back/forward cache
// would otherwise hold its connections, and the browser allows six per
// server. Coming back from that cache starts afresh.
window.addEventListener("pagehide", () => {
  leaving = true;
  if (cleanup) { try { cleanup(); } catch { /* going away */ } cleanup = null; }
  events.stop();
});
window.addEventListener("pageshow", (e) => { if (e.persisted) location.reload(); });
let seq = 0;

async function render() {
  const path = location.pathname.replace(/^\/ui\/?/, "").replace(/\/$/, "");
  let name = "notfound", params = [];
  for (const [re, view] of routes) {
    const m = path.match(re);
    if (m) { name = view; params = m.slice(1).map(decodeURIComponent); break; }
  }
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === (navOf[name] || name)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (cleanup) { try { cleanup(); } catch (e) { console.error(e); } cleanup = null; }
  const my = ++seq;
  const el = h("div", { class: "view", "data-view": name });
  replace(main, el);
  if (name === "notfound") {
    replace(el, h("h1", null, "Not found"), h("p", null, "No page at ", h("code", null, location.pathname)));
    return;
  }
  try {
    const mod = await import("./views/" + name + ".js");
    if (my !== seq) return;
    const q = new URLSearchParams(location.search);
    cleanup = (await mod.mount(el, params, q)) || null;
    if (my !== seq && cleanup) { cleanup(); cleanup = null; }
  } catch (e) {
    if (leaving) return; // a load cut short by navigating away
    if (e && e.status === 403) { // the token's roles do not cover this page: say so, no error
      if (my === seq) replace(el, h("h1", null, "Not allowed"), h("p", { class: "error", role: "alert", id: "forbidden" }, e.message));
      return;
    }
    console.error(e);
    if (my === seq) add_error(el, e);
  }
}

function add_error(el, e) {
  el.append(h("p", { class: "error", role: "alert" }, "Error: " + (e && e.message ? e.message : String(e))));
}

/** go navigates inside the UI without a reload. */
export function go(path, replaceState = false) {
  const url = path.startsWith("/") ? path : "/ui/" + path;
  if (replaceState) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  render();
  main.focus({ preventScroll: true });
  window.scrollTo(0, 0);
}
window.foremanGo = go;

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-link]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  go(a.getAttribute("href"));
});
window.addEventListener("popstate", render);

// Keyboard: g then o/j/w/s/n/c/u jumps to a page; / focuses the page's search.
let gPressed = 0;
document.addEventListener("keydown", (e) => {
  if (e.target.closest("input, textarea, select, [contenteditable]") || e.metaKey || e.ctrlKey || e.altKey) return;
  if (e.key === "g") { gPressed = Date.now(); return; }
  if (Date.now() - gPressed < 1500) {
    const to = { o: "", j: "jobs", w: "workflows", s: "schedules", n: "nodes", c: "cluster", u: "submit" }[e.key];
    gPressed = 0;
    if (to !== undefined) { e.preventDefault(); go("/ui/" + to); }
    return;
  }
  if (e.key === "/") {
    const s = main.querySelector("input[type=search]");
    if (s) { e.preventDefault(); s.focus(); }
  }
});

// The token prompt (ACLs): shown on a 401, kept in sessionStorage.
let pending = null;
onUnauthorized(() => {
  if (pending) return pending;
  pending = new Promise((resolve) => {
    const input = h("input", { type: "password", name: "token", autocomplete: "off", required: true, "aria-label": "API token" });
    const d = h("dialog", { class: "confirm", id: "token-dialog" },
      h("form", { method: "dialog" },
        h("h2", null, "API token required"),
        h("p", null, getToken() ? "The token was refused. Enter another one." : "This cluster needs a token. It is kept in this tab only (session storage)."),
        h("label", null, "Token ", input),
        h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Use token"))));
    d.addEventListener("close", () => {
      setToken(input.value.trim());
      d.remove();
      pending = null;
      events.reconnect();
      acl.refresh();
      resolve();
    });
    document.body.append(d);
    d.showModal();
  });
  return pending;
});

// Live indicator and the lost-connection banner.
const banner = document.getElementById("banner");
const live = document.getElementById("live");
let lostTimer = null;
events.onState((st, last) => {
  live.className = "live " + st;
  live.textContent = st === "live" ? "● live" : st === "lost" ? "● offline" : "● connecting";
  clearTimeout(lostTimer);
  if (st === "live") { banner.hidden = true; return; }
  if (st === "lost") {
    lostTimer = setTimeout(() => {
      banner.hidden = false;
      replace(banner, "Live updates lost — reconnecting",
        last ? " (will resume after event " + last + ")" : "", "… ",
        h("button", { type: "button", onclick: () => events.reconnect() }, "Retry now"));
    }, 1000);
  }
});
events.subscribe((ev) => {
  if (ev.type === "reset") toast("The event stream was reset: the page re-reads its data.", "info");
  if (ev.topic === "leader") refreshVia();
});

// Which node is answering, and its role: the page works through any node.
const via = document.getElementById("via");
let viaText = [];
async function refreshVia() {
  try {
    const r = await api("/v1/cluster/raft");
    viaText = ["via ", h("b", null, r.node), " (" + String(r.state || "").toLowerCase() + ")",
      r.leader && r.leader !== r.node ? " · leader " + r.leader : ""];
  } catch (e) {
    viaText = []; // no operator role: the raft view is not ours to read
  }
  drawVia();
}
function drawVia() {
  replace(via, viaText, acl.who ? h("span", { id: "who", title: "The token this tab sends" }, (viaText.length ? " · " : "") + "token " + acl.who) : "");
}
acl.onChange(drawVia);

window.foremanStats = events.stats; // read by the browser tests
events.start();
acl.refresh();
refreshVia();
render();
