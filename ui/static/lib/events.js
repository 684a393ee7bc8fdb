// One event stream for all the tabs of a browser: GET /v1/events read
// with fetch (so the bearer token goes along), parsed as Server-Sent Events
// and fanned out to the views. A dropped connection shows the banner and
// reconnects with Last-Event-ID, so nothing is missed; a "reset" (the
// node's ring no longer holds our position) tells views to re-read what
// they show.
//
// Sharing: a browser allows six HTTP/1.1 connections per server, and a
// stream per tab would leave the seventh tab's requests waiting. The tabs
// that send the same token elect one holder of the stream with the Web
// Locks API (the lock is held while the tab lives and passes to another tab
// when it closes); the holder posts every event and state change on a
// BroadcastChannel the others listen to. A new holder resumes from the last
// event it was handed, so a change of holder loses nothing either. Where
// either API is missing (Web Locks needs a secure context: https or
// localhost), each tab holds its own stream as before.

import { api, stream, getToken } from "./api.js";

const subs = new Set();
let lastID = "";
let state = "connecting";
const stateSubs = new Set();
let abort = null;
let lastByte = 0;
let stopped = false;

/** stop ends the stream for good (the page is going away: an open stream
 * would keep its connection, and the browser allows only six per server). */
export function stop() {
  stopped = true;
  if (abort) abort.abort();
  if (shared) { shared.close(); shared = null; }
}

/** subscribe(fn): fn(event) for every event; returns the unsubscribe. */
export function subscribe(fn) { subs.add(fn); return () => subs.delete(fn); }

/** onState(fn): fn("live"|"connecting"|"lost", detail) on changes. */
export function onState(fn) { stateSubs.add(fn); fn(state, lastID); return () => stateSubs.delete(fn); }

export const lastEventID = () => lastID;

function setState(s, detail) {
  if (shared && shared.holding) shared.post({ t: "state", s, last: lastID });
  if (s === state) return;
  state = s;
  for (const fn of stateSubs) fn(s, detail ?? lastID);
}

/** stats: counters for the browser tests (holder: this tab holds the
 * stream; mode: "shared" or "own"). */
export const stats = { events: 0, connects: 0, resets: 0, holder: false, mode: "" };

function dispatch(ev) {
  if (shared && shared.holding) shared.post({ t: "ev", id: lastID, ev });
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

// The channel and lock name: one per token (tabs with different tokens
// see different events), by a short non-secret hash of it.
function keyOf(token) {
  let x = 0x811c9dc5;
  for (let i = 0; i < token.length; i++) x = Math.imul(x ^ token.charCodeAt(i), 0x01000193) >>> 0;
  return "foreman-events-" + (token ? x.toString(36) : "none");
}

let shared = null; // { key, holding, post, close }

function canShare() {
  return typeof BroadcastChannel === "function" && !!(navigator.locks && navigator.locks.request);
}

/** start joins the tabs' shared stream (holding it when elected), or holds
 * its own; call once. */
export function start() {
  if (!canShare()) { stats.mode = "own"; run(); return; }
  stats.mode = "shared";
  join();
}

function join() {
  const key = keyOf(getToken());
  const ch = new BroadcastChannel(key);
  const gone = new AbortController();
  const me = {
    key, holding: false,
    post: (m) => { try { ch.postMessage(m); } catch { /* closed */ } },
    close: () => { gone.abort(); ch.close(); },
  };
  shared = me;
  ch.onmessage = ({ data: m }) => {
    if (me.holding) {
      // Another tab arrived, or asks for a reconnect ("Retry now").
      if (m.t === "hello") me.post({ t: "state", s: state, last: lastID });
      if (m.t === "reconnect" && abort) abort.abort();
      return;
    }
    if (m.t === "ev") { if (m.id) lastID = m.id; dispatch(m.ev); }
    else if (m.t === "state") { if (m.last) lastID = m.last; setState(m.s, m.last); }
  };
  me.post({ t: "hello" });
  // Held until this tab goes (stop) or its token changes; then the next
  // tab in line is granted it and resumes from the last event it saw.
  navigator.locks.request(key, { signal: gone.signal }, async () => {
    if (gone.signal.aborted) return;
    me.holding = true;
    stats.holder = true;
    try { await run(() => gone.signal.aborted); } finally { me.holding = false; stats.holder = false; }
  }).catch(() => { /* aborted while waiting: this tab left or changed token */ });
}

function run(quit = () => false) {
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
    while (!stopped && !quit()) {
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
      if (stopped || quit()) return;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 8000);
    }
  };
  return loop();
}

/** reconnect drops the stream now (it resumes from the last event). After
 * a new token, this tab joins the tabs that send that one. */
export function reconnect() {
  if (shared && shared.key !== keyOf(getToken())) {
    const was = shared;
    shared = null;
    if (was.holding && abort) abort.abort();
    was.close();
    join();
    return;
  }
  if (shared && !shared.holding) { shared.post({ t: "reconnect" }); return; }
  if (abort) abort.abort();
}
