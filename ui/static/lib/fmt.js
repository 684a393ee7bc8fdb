// Formatting of times, durations and resources.

const ZERO = "0001-01-01T00:00:00Z";

export function time(s) {
  if (!s || s === ZERO) return "—";
  const d = new Date(s);
  if (isNaN(d)) return String(s);
  return d.toLocaleString(undefined, { hour12: false });
}

export function ago(s, now = Date.now()) {
  if (!s || s === ZERO) return "—";
  const ms = now - new Date(s).getTime();
  if (isNaN(ms)) return "—";
  if (ms < 0) return "in " + dur(-ms);
  return dur(ms) + " ago";
}

export function dur(ms) {
  if (ms == null || isNaN(ms)) return "—";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return Math.floor(s / 60) + "m " + Math.floor(s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}

export function between(a, b) {
  if (!a || a === ZERO) return "—";
  const end = !b || b === ZERO ? Date.now() : new Date(b).getTime();
  return dur(end - new Date(a).getTime());
}

export const cpu = (m) => (m == null ? "—" : m >= 1000 ? (m / 1000).toFixed(m % 1000 ? 2 : 0) + " cores" : m + "m");
export const mem = (mb) => (mb == null ? "—" : mb >= 1024 ? (mb / 1024).toFixed(1) + " GiB" : mb + " MiB");
export const bytes = (b) => (b == null ? "—" : b >= 1 << 30 ? (b / (1 << 30)).toFixed(1) + " GiB" : b >= 1 << 20 ? (b / (1 << 20)).toFixed(1) + " MiB" : b >= 1024 ? (b / 1024).toFixed(1) + " KiB" : b + " B");

export function labels(m) {
  if (!m) return "";
  return Object.keys(m).sort().map((k) => k + "=" + m[k]).join(", ");
}

/** shellJoin writes a command's arguments as a POSIX shell would read them
 * back: an argument with anything but safe characters is single-quoted
 * (`sh -c 'echo hi; exit 3'`), a quote inside it written '\''. */
export function shellJoin(args) {
  return (args || []).map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : "'" + String(a).replace(/'/g, "'\\''") + "'")).join(" ");
}

/** clip shortens very long text for a table cell (the full text is in the title). */
export function clip(s, n = 120) {
  s = String(s ?? "");
  return s.length > n ? s.slice(0, n) + "…" : s;
}

// ANSI escape sequences (CSI, OSC and single-character ones): log text is
// shown without them rather than interpreting colours.
const ANSI = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/g;
export const stripAnsi = (s) => s.replace(ANSI, "");
