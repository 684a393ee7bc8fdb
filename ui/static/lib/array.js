// Job arrays (fsm/array.go): a progress bar of an array's tasks by how
// they ended, and a grid of its tasks' states, one square per index.

import { h, s, enc } from "./dom.js";

/** arrayProgress(a): a bar of the array's tasks (succeeded, failed,
 * cancelled, live) and "done/size". */
export function arrayProgress(a) {
  const done = (a.succeeded || 0) + (a.failed || 0) + (a.cancelled || 0);
  const parts = [["succeeded", a.succeeded], ["failed", a.failed], ["cancelled", a.cancelled], ["running", a.live]];
  const svg = s("svg", { viewBox: "0 0 100 8", preserveAspectRatio: "none", class: "array-bar" });
  svg.append(s("rect", { x: 0, y: 0, width: 100, height: 8, class: "seg-bg" }));
  let x = 0;
  for (const [cls, n] of parts) {
    if (!n || !a.size) continue;
    const w = (100 * n) / a.size;
    svg.append(s("rect", { x: x.toFixed(2), y: 0, width: w.toFixed(2), height: 8, class: "seg-" + cls }));
    x += w;
  }
  const text = `${done.toLocaleString()}/${(a.size || 0).toLocaleString()}`;
  const title = parts.filter(([, n]) => n).map(([c, n]) => `${n} ${c}`).join(", ") || "no task made yet";
  return h("span", { class: "array-progress", role: "meter", "aria-valuemin": 0, "aria-valuemax": a.size || 0, "aria-valuenow": done, title }, svg, h("span", null, text));
}

/** taskGrid(array job, tasks, max): one square per index up to max, a
 * made task's linking to it in its state's colour, an unmade one empty. */
export function taskGrid(j, tasks, max) {
  const byIndex = new Map(tasks.map((t) => [t.array_task.index, t]));
  const a = j.spec.array, step = a.step || 1, size = j.array.size;
  const cells = [];
  for (let pos = 0; pos < Math.min(size, max); pos++) {
    const i = a.start + pos * step, t = byIndex.get(i);
    cells.push(t ? h("a", { href: "/ui/jobs/" + enc(t.id), "data-link": true, class: "cell s-" + t.state, title: `index ${i}: ${t.state}`, "data-index": i })
      : h("span", { class: "cell unmade", title: `index ${i}: not made yet`, "data-index": i }));
  }
  return h("div", { class: "task-grid", id: "task-grid" }, cells);
}
