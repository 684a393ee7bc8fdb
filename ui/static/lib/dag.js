// Layered DAG drawing: rank = longest path from a root, order within a
// rank by a few barycentre sweeps (fewer crossings), edges as cubic
// curves. Nodes are SVG groups with the job state as a class, so a live
// update only changes a class.

import { s } from "./dom.js";

const NW = 150, NH = 34, GX = 60, GY = 26;

/** layout(nodes): nodes = [{key, deps: [key]}] → {pos: Map(key→{x,y}), w, h} */
export function layout(nodes) {
  const by = new Map(nodes.map((n) => [n.key, n]));
  const rank = new Map();
  const visiting = new Set();
  const rankOf = (k) => {
    if (rank.has(k)) return rank.get(k);
    if (visiting.has(k)) return 0; // a cycle cannot be submitted; be safe anyway
    visiting.add(k);
    const n = by.get(k);
    let r = 0;
    for (const p of n?.deps || []) if (by.has(p)) r = Math.max(r, rankOf(p) + 1);
    visiting.delete(k);
    rank.set(k, r);
    return r;
  };
  nodes.forEach((n) => rankOf(n.key));
  const layers = [];
  for (const n of nodes) (layers[rank.get(n.key)] ||= []).push(n.key);
  const children = new Map();
  for (const n of nodes) for (const p of n.deps || []) (children.get(p) || children.set(p, []).get(p)).push(n.key);
  const idx = new Map();
  const setIdx = () => layers.forEach((l) => l.forEach((k, i) => idx.set(k, i)));
  setIdx();
  const bary = (ks) => { const v = ks.filter((k) => idx.has(k)).map((k) => idx.get(k)); return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null; };
  for (let pass = 0; pass < 4; pass++) {
    const down = pass % 2 === 0;
    const order = down ? layers.slice(1) : layers.slice(0, -1).reverse();
    for (const l of order) {
      const key = new Map(l.map((k) => [k, bary(down ? by.get(k).deps || [] : children.get(k) || []) ?? idx.get(k)]));
      l.sort((a, b) => key.get(a) - key.get(b));
      l.forEach((k, i) => idx.set(k, i));
    }
  }
  const maxLen = Math.max(1, ...layers.map((l) => l.length));
  const pos = new Map();
  layers.forEach((l, r) => {
    const off = ((maxLen - l.length) * (NH + GY)) / 2;
    l.forEach((k, i) => pos.set(k, { x: 10 + r * (NW + GX), y: 10 + off + i * (NH + GY) }));
  });
  return { pos, w: 20 + layers.length * (NW + GX) - GX, h: 20 + maxLen * (NH + GY) - GY };
}

/** draw(nodes, pos): nodes = [{key, label, state, href, deps}] → <svg> */
export function draw(nodes, { pos, w, h }, onOpen) {
  const edges = s("g", { class: "edges" });
  const boxes = s("g", { class: "nodes" });
  for (const n of nodes) {
    const b = pos.get(n.key);
    for (const p of n.deps || []) {
      const a = pos.get(p);
      if (!a) continue;
      const x1 = a.x + NW, y1 = a.y + NH / 2, x2 = b.x, y2 = b.y + NH / 2, mx = (x1 + x2) / 2;
      edges.append(s("path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, class: "edge", "data-from": p, "data-to": n.key }));
    }
    const label = n.label.length > 20 ? n.label.slice(0, 19) + "…" : n.label;
    const g = s("g", { class: "node s-" + n.state, "data-key": n.key, transform: `translate(${b.x},${b.y})`, tabindex: 0, role: "link", "aria-label": n.label + ": " + n.state },
      s("title", null, n.label + " — " + n.state),
      s("rect", { width: NW, height: NH, rx: 6 }),
      s("text", { x: 10, y: 21 }, label));
    g.addEventListener("click", () => onOpen(n));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter") onOpen(n); });
    boxes.append(g);
  }
  return s("svg", { class: "dag", viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: "img", "aria-label": "Workflow graph" },
    s("defs"), edges, boxes);
}
