// What the token may do, so the pages can disable what it may not (with a
// tooltip naming the role needed) instead of letting a click end in a 403.
// GET /v1/acl/token/self says who the token is; with ACL off the agent
// answers acl_disabled and everything is allowed. The rules mirror the
// server's (httpapi/acl.go, identity.allow); the server still decides.

import { api } from "./api.js";

const RANK = { read: 1, submit: 2, write: 3 };
let roles = null; // null: ACL off (or not known yet): nothing is disabled
const subs = new Set();

const nsOf = (ns) => ns || "default";

/** denied(perm, ns) → null when the token may, else why not (a sentence).
 * perm: read | submit | write (per namespace) | operator | management.
 * ns "" means "in some namespace" (the server's guard check). */
export function denied(perm, ns = "") {
  if (!roles) return null;
  for (const r of roles) {
    if (r.role === "management") return null;
    if (perm === "operator" && r.role === "operator") return null;
    if (RANK[perm] && RANK[r.role] >= RANK[perm] && (ns === "" || r.namespace === "*" || r.namespace === nsOf(ns))) return null;
  }
  const where = ns ? ` on namespace "${nsOf(ns)}"` : "";
  const has = roles.length ? roles.map((r) => r.role + (r.namespace ? ":" + r.namespace : "")).join(", ") : "no roles";
  return `Needs the ${perm} role${where}; this token has ${has}`;
}

/** guard(el, perm, ns): el, disabled (with the reason as its tooltip)
 * while the token lacks perm; follows token changes. A button the view
 * disabled for its own reason stays disabled. */
export function guard(el, perm, ns = "") {
  el.dataset.perm = perm;
  el.dataset.permNs = ns;
  el.dataset.ownDisabled = el.disabled ? "1" : "";
  if (el.title) el.dataset.ownTitle = el.title;
  apply(el);
  return el;
}

/** reguard(el, ns): the same check on another namespace (a form's field). */
export function reguard(el, ns) { el.dataset.permNs = ns; apply(el); }

function apply(el) {
  const why = denied(el.dataset.perm, el.dataset.permNs);
  el.disabled = !!why || el.dataset.ownDisabled === "1";
  if (why) { el.title = why; el.classList.add("denied"); el.setAttribute("aria-description", why); }
  else { el.classList.remove("denied"); el.removeAttribute("aria-description"); if (el.dataset.ownTitle) el.title = el.dataset.ownTitle; else el.removeAttribute("title"); }
}

/** onChange(fn): fn() when the token's roles become known or change. */
export function onChange(fn) { subs.add(fn); return () => subs.delete(fn); }

/** who: the token's description for the header ("" with ACL off). */
export let who = "";

/** refresh asks who the token is (after start-up and a new token). */
export async function refresh() {
  try {
    const t = await api("/v1/acl/token/self");
    roles = t.roles || [];
    who = (t.name || t.accessor_id) + " (" + (roles.map((r) => r.role + (r.namespace ? ":" + r.namespace : "")).join(", ") || "no roles") + ")";
  } catch (e) {
    if (e.code !== "acl_disabled") return; // unknown: leave as it was (the server still decides)
    roles = null; who = "";
  }
  for (const el of document.querySelectorAll("[data-perm]")) apply(el);
  for (const fn of subs) fn();
}
