// One event stream per tab: GET /v1/events read with fetch (so the bearer
// token goes along), parsed as Server-Sent Events and fanned out to the
// views. A dropped connection shows the banner and reconnects with
// Last-Event-ID, so nothing is missed; a "reset" (the node's ring no longer
// holds our position) tells views to re-read what they show.

import { api, stream } from "./api.js";

const subs = new Set();
let lastID = "";
let state = "connecting";
const stateSubs = new Set();
let abort = null;
let lastByte = 0;
let stopped = false;

/** stop ends the stream for good (the page is going away: an open stream
 * would keep its connection, and the browser allows only six per server). */
export function stop() { stopped = true; if (abort) abort.abort(); }

/** subscribe(fn): fn(event) for every event; returns the unsubscribe. */
export function subscribe(fn) { subs.add(fn); return () => subs.delete(fn); }

/** onState(fn): fn("live"|"connecting"|"lost", detail) on changes. */
export function onState(fn) { stateSubs.add(fn); fn(state, lastID); return () => stateSubs.delete(fn); }

export const lastEventID = () => lastID;

function setState(s, detail) {
  if (s === state) return;
  state = s;
  for (const fn of stateSubs) fn(s, detail ?? lastID);
}

/** stats: counters for the browser tests. */
export const stats = { events: 0, connects: 0, resets: 0 };

function dispatch(ev) {
  stats.events++;
  if (ev.type === "reset") stats.resets++;
  for (const fn of subs) {
    try { fn(ev); } catch (e) { console.error("event handler", e); }
  }
}

/** parser turns chunks of text/event-stream into events. */
function parser(onEvent) {
  let buf = "", id = "", type = "", data = [];
  return (chunk) => {
    buf += chunk;
    let pos = 0, nl;
    while ((nl = buf.indexOf("\n", pos)) >= 0) {
      let line = buf.slice(pos, nl);
      pos = nl + 1;
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        if (data.length) onEvent({ id, type: type || "message", data: data.join("\n") });
        type = ""; data = [];
        continue;
      }
      if (line.startsWith(":")) continue; // comment: heartbeat
      const c = line.indexOf(":");
      const field = c < 0 ? line : line.slice(0, c);
      let value = c < 0 ? "" : line.slice(c + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") id = value;
      else if (field === "event") type = value;
      else if (field === "data") data.push(value);
    }
    buf = buf.slice(pos);
  };
}

const IDLE_MS = 40000; // the server sends a heartbeat every 15 s

/** start connects and keeps reconnecting; call once. */
export function start() {
  let delay = 500;
  const loop = async () => {
    // Where to resume before any event has arrived: the index the node had
    // applied when the page started, so events missed during a first
    // disconnection are replayed too (or a reset says they are gone).
    let startIndex = "";
    try {
      const r = await api("/v1/cluster/raft");
      if (r.applied_index) startIndex = String(r.applied_index);
    } catch { /* the stream starts from now */ }
    while (!stopped) {
      abort = new AbortController();
      const ctl = abort;
      lastByte = Date.now();
      stats.connects++;
      const watchdog = setInterval(() => { if (Date.now() - lastByte > IDLE_MS) ctl.abort(); }, 5000);
      const headers = lastID ? { "Last-Event-ID": lastID } : undefined;
      const path = !lastID && startIndex ? "/v1/events?index=" + startIndex : "/v1/events";
      const onChunk = parser((m) => {
        if (m.id) lastID = m.id;
        let ev;
        try { ev = JSON.parse(m.data); } catch { return; }
        if (m.type === "reset") ev.type = "reset";
        dispatch(ev);
      });
      try {
        await stream(path, (chunk) => {
          lastByte = Date.now();
          if (state !== "live") { setState("live"); delay = 500; }
          onChunk(chunk);
        }, ctl.signal, headers);
        setState("lost", lastID);
      } catch (e) {
        setState("lost", lastID);
      } finally {
        clearInterval(watchdog);
      }
      if (stopped) return;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 8000);
    }
  };
  loop();
}

/** reconnect drops the stream now (it resumes from the last event). */
export function reconnect() { if (abort) abort.abort(); }
