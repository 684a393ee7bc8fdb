// Workflows: the list, newest first, with job counts per state.

import { h, replace, link, badge, enc, throttle } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { ago } from "../lib/fmt.js";

export async function mount(el, _p, q) {
  const body = h("tbody");
  const pager = h("nav", { class: "pager" });
  replace(el, h("h1", null, "Workflows"), h("table", { id: "workflows" },
    h("thead", null, h("tr", null, ["Name", "ID", "State", "Jobs", "Counts", "Submitted", "Finished"].map((x) => h("th", null, x)))), body), pager);
  const cursor = q.get("cursor") || "";
  const load = async () => {
    const l = await api("/v1/workflows?limit=50" + (cursor ? "&cursor=" + enc(cursor) : ""));
    replace(body, l.workflows.length ? l.workflows.map((w) => h("tr", null,
      h("td", null, link("workflows/" + enc(w.id), w.name)),
      h("td", null, h("code", null, w.id)),
      h("td", null, badge(w.state)),
      h("td", null, w.jobs),
      h("td", null, Object.entries(w.counts || {}).filter(([, n]) => n).map(([st, n]) => h("span", { class: "badge s-" + st }, st + " " + n))),
      h("td", null, ago(w.submitted_at)), h("td", null, ago(w.finished_at)))) : h("tr", null, h("td", { colspan: 7, class: "muted" }, "No workflows. Submit one with `foreman workflow submit -f FILE`.")));
    replace(pager, cursor ? h("a", { href: "/ui/workflows", "data-link": true }, "First page") : "",
      l.next_cursor ? h("a", { href: "/ui/workflows?cursor=" + enc(l.next_cursor), "data-link": true }, "Older →") : "");
  };
  await load();
  const again = throttle(() => load().catch(() => {}), 1000);
  return subscribe((ev) => { if (ev.workflow || ev.topic === "workflow" || ev.type === "reset") again(); });
}
