// One schedule: its spec, next fire, the last 20 decided ticks.

import { h, replace, link, badge, enc, throttle } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { time } from "../lib/fmt.js";
import { actions } from "./schedules.js";

export async function mount(el, [name]) {
  const base = "/v1/schedules/" + enc(name);
  const load = async () => {
    const sc = await api(base);
    const sp = sc.spec;
    replace(el,
      h("div", { class: "head" }, h("h1", null, sp.name), badge(sp.paused ? "paused" : "active"), h("span", { class: "spacer" }), actions(sc, () => again())),
      h("dl", { class: "kv card" },
        [["Cron", h("code", null, sp.cron)], ["Time zone", sp.time_zone || "UTC"],
          ["Next fire", sc.next_fire ? sc.next_fire + " (" + time(sc.next_fire_utc) + " local)" : "—"],
          ["Overlap", sp.overlap], ["Catch-up", sp.catch_up + (sp.catch_up === "all" ? " (max " + sp.max_catch_up + ")" : "")],
          ["Fired", sc.fired], ["Skipped", sc.skipped], ["Created", time(sc.created_at)]]
          .map(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
      h("h2", null, "History (last 20 decided ticks, newest first)"),
      h("table", { id: "fires" }, h("thead", null, h("tr", null, ["Tick", "Applied", "Job", "Outcome", "Note"].map((x) => h("th", null, x)))),
        h("tbody", null, (sc.fires || []).slice().reverse().map((f) => h("tr", null,
          h("td", null, time(f.tick)), h("td", null, time(f.at)),
          h("td", null, f.job_id ? link("jobs/" + enc(f.job_id), f.job_id) : "—"),
          h("td", null, f.outcome ? badge(f.outcome) : f.skipped ? badge("skipped") : ""),
          h("td", null, f.manual ? "manual trigger" : "", f.skipped || "", f.count > 1 ? " (" + f.count + " ticks)" : ""))))),
      h("details", null, h("summary", null, "Job template (JSON)"), h("pre", { class: "spec" }, JSON.stringify(sp.job, null, 2))));
  };
  const again = throttle(() => load().catch(() => {}), 1000);
  await load();
  return subscribe((ev) => { if (ev.schedule === name || ev.type === "reset") again(); });
}
