// Schedules: next fires in the schedule's zone, counts, pause/resume/trigger.

import { h, replace, link, badge, enc, toast, throttle } from "../lib/dom.js";
import { api, post } from "../lib/api.js";
import { subscribe } from "../lib/events.js";
import { ago } from "../lib/fmt.js";
import { guard } from "../lib/acl.js";

export function actions(sc, after) {
  const name = sc.spec.name;
  const act = (verb) => async () => {
    try {
      const r = await post("/v1/schedules/" + enc(name) + "/" + verb);
      toast(verb === "trigger" ? "Triggered: job " + r.job_id : name + ": " + verb + "d");
      after && after();
    } catch (e) { toast(e.message, "error"); }
  };
  return h("span", { class: "actions" },
    guard(sc.spec.paused ? h("button", { type: "button", onclick: act("resume") }, "Resume") : h("button", { type: "button", onclick: act("pause") }, "Pause"), "write", sc.spec.namespace),
    guard(h("button", { type: "button", onclick: act("trigger") }, "Trigger now"), "write", sc.spec.namespace));
}

export async function mount(el) {
  const body = h("tbody");
  replace(el, h("h1", null, "Schedules"), h("table", { id: "schedules" },
    h("thead", null, h("tr", null, ["Name", "Cron", "Zone", "Next fire", "State", "Fired", "Skipped", "Last job", ""].map((x) => h("th", null, x)))), body));
  const load = async () => {
    const l = await api("/v1/schedules");
    replace(body, l.schedules.length ? l.schedules.map((sc) => h("tr", { "data-schedule": sc.spec.name },
      h("td", null, link("schedules/" + enc(sc.spec.name), sc.spec.name)),
      h("td", null, h("code", null, sc.spec.cron)),
      h("td", null, sc.spec.time_zone || "UTC"),
      h("td", { title: sc.next_fire_utc || "" }, sc.next_fire ? [sc.next_fire.replace("T", " "), h("small", { class: "muted" }, " (" + ago(sc.next_fire_utc) + ")")] : "—"),
      h("td", null, badge(sc.spec.paused ? "paused" : "active")),
      h("td", null, sc.fired), h("td", null, sc.skipped),
      h("td", null, sc.last_job ? link("jobs/" + enc(sc.last_job), sc.last_job) : "—"),
      h("td", null, actions(sc, () => again())))) : h("tr", null, h("td", { colspan: 9, class: "muted" }, "No schedules. Create one with `foreman schedule create NAME --cron SPEC -- CMD`.")));
  };
  const again = throttle(() => load().catch(() => {}), 1000);
  await load();
  const tick = setInterval(again, 30000); // "in 3m" labels and next fires move with time
  const unsub = subscribe((ev) => { if (ev.topic === "schedule" || ev.type === "reset") again(); });
  return () => { clearInterval(tick); unsub(); };
}
