// A log pane: text appended as it streams, as text nodes only. ANSI escapes
// are stripped, a line longer than MAX_LINE shows its start and how much was
// cut, and only the last MAX_LINES lines stay in the page, so a 1 MB line or
// a chatty job cannot freeze it. Appends are batched per animation frame.

import { h } from "./dom.js";
import { stripAnsi } from "./fmt.js";

const MAX_LINES = 5000;
const MAX_LINE = 4096;

export function logView() {
  const pre = h("pre", { class: "log", tabindex: 0, "aria-label": "Log output", "aria-live": "off" });
  let partial = "";     // the current unfinished line
  let partialLen = 0;   // its real length (it may be cut)
  let pendingLines = [];
  let lines = 0;
  let scheduled = false;
  let follow = true;
  pre.addEventListener("scroll", () => { follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8; });

  const cut = (s, n) => (n > MAX_LINE ? s.slice(0, MAX_LINE) + ` … [${(n - MAX_LINE).toLocaleString()} more characters]` : s);
  const flush = () => {
    scheduled = false;
    if (!pendingLines.length) return;
    const frag = document.createDocumentFragment();
    for (const l of pendingLines) frag.append(h("span", { class: "ln" }, l + "\n"));
    pendingLines = [];
    pre.append(frag);
    while (lines > MAX_LINES && pre.firstChild) { pre.firstChild.remove(); lines--; }
    if (follow) pre.scrollTop = pre.scrollHeight;
  };
  const push = (line) => {
    pendingLines.push(line); lines++;
    if (!scheduled) { scheduled = true; requestAnimationFrame(flush); }
  };
  return {
    el: pre,
    write(chunk) {
      let start = 0;
      for (;;) {
        const nl = chunk.indexOf("\n", start);
        const piece = nl < 0 ? chunk.slice(start) : chunk.slice(start, nl);
        if (partial.length < MAX_LINE + 1) partial += piece.slice(0, MAX_LINE + 1 - partial.length);
        partialLen += piece.length;
        if (nl < 0) break;
        push(cut(stripAnsi(partial), partialLen));
        partial = ""; partialLen = 0;
        start = nl + 1;
      }
    },
    end(note) {
      if (partialLen) { push(cut(stripAnsi(partial), partialLen)); partial = ""; partialLen = 0; }
      if (note) push(note);
      flush();
    },
    clear() { pre.replaceChildren(); partial = ""; partialLen = 0; lines = 0; pendingLines = []; },
  };
}
