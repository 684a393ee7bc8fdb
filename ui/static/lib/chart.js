// Small SVG charts, drawn with createElementNS (no library).

import { s, h } from "./dom.js";

/**
 * sparkline(values, {label, unit}): a line over the last values with the
 * latest value and the maximum as text.
 */
export function sparkline(values, { label, unit = "", fmt = (v) => v.toFixed(v < 10 ? 1 : 0) } = {}) {
  const W = 240, H = 48, n = values.length;
  const max = Math.max(1e-9, ...values.filter((v) => v != null));
  const pts = values.map((v, i) => [n <= 1 ? W : (i / (n - 1)) * W, H - 2 - ((v ?? 0) / max) * (H - 6)]);
  const line = pts.map(([x, y]) => x.toFixed(1) + "," + y.toFixed(1)).join(" ");
  const area = "0," + H + " " + line + " " + W + "," + H;
  const last = values.length ? values[values.length - 1] : null;
  return h("figure", { class: "spark" },
    h("figcaption", null, label, h("b", null, last == null ? "—" : fmt(last) + unit), h("small", null, "max " + fmt(max) + unit)),
    s("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": label },
      s("title", null, label),
      s("polygon", { points: area, class: "spark-area" }),
      s("polyline", { points: line, class: "spark-line" })));
}

/** bar(used, total, text): a horizontal capacity bar. */
export function bar(used, total, text) {
  const frac = total > 0 ? Math.min(1, used / total) : 0;
  const cls = frac > 0.9 ? "hot" : frac > 0.7 ? "warm" : "";
  return h("div", { class: "bar " + cls, role: "meter", "aria-valuemin": 0, "aria-valuemax": total || 0, "aria-valuenow": used || 0, title: text },
    s("svg", { viewBox: "0 0 100 8", preserveAspectRatio: "none" },
      s("rect", { x: 0, y: 0, width: 100, height: 8, class: "bar-bg" }),
      s("rect", { x: 0, y: 0, width: (frac * 100).toFixed(2), height: 8, class: "bar-fg" })),
    h("span", null, text));
}

/**
 * lines(series, {label, unit}): several lines over the same points, e.g.
 * used next to requested over time. series: [{name, values, cls}].
 */
export function lines(series, { label, unit = "", fmt = (v) => v.toFixed(v < 10 ? 2 : 0) } = {}) {
  const W = 600, H = 120;
  const n = Math.max(0, ...series.map((x) => x.values.length));
  const max = Math.max(1e-9, ...series.flatMap((x) => x.values));
  const pt = (v, i) => (n <= 1 ? W : (i / (n - 1)) * W).toFixed(1) + "," + (H - 2 - (v / max) * (H - 6)).toFixed(1);
  return h("figure", { class: "lines" },
    h("figcaption", null, label, h("small", null, " max " + fmt(max) + unit + " — "),
      ...series.map((x) => h("span", { class: "legend " + x.cls }, x.name + " "))),
    s("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": label },
      s("title", null, label),
      ...series.map((x) => s("polyline", { points: x.values.map(pt).join(" "), class: "line " + x.cls }))));
}
