// Every request the UI makes goes through request(): it adds the bearer
// token kept in sessionStorage (when ACLs are on) and asks for one on a
// 401. The event stream and log tails use fetch() with a ReadableStream
// rather than EventSource, so they carry the same header.

const TOKEN_KEY = "foreman.token";

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const getToken = () => sessionStorage.getItem(TOKEN_KEY) || "";
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

let askToken = null; // set by the app: shows the token prompt, resolves when one was entered

export function onUnauthorized(fn) { askToken = fn; }

/** request: a fetch with the token; retries once after the token prompt on 401. */
export async function request(path, opts = {}, retried = false) {
  const headers = new Headers(opts.headers || {});
  const t = getToken();
  if (t) headers.set("Authorization", "Bearer " + t);
  let body = opts.body;
  if (body !== undefined && typeof body !== "string") {
    headers.set("Content-Type", "application/json");
    body = JSON.stringify(body);
  }
  const r = await fetch(path, { method: opts.method || "GET", headers, body, signal: opts.signal, cache: "no-store" });
  if (r.status === 401 && askToken && !retried) {
    await askToken();
    return request(path, opts, true);
  }
  return r;
}

/** api: request + JSON; a non-2xx reply throws ApiError with the API's message. */
export async function api(path, opts) {
  const r = await request(path, opts);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!r.ok) throw new ApiError(r.status, (data && data.error) || text.trim() || r.statusText, data && data.code);
  return data ?? {};
}

export const post = (path, body) => api(path, { method: "POST", body: body ?? {} });

/**
 * stream reads a text/plain or text/event-stream body as it arrives and
 * calls onChunk with each decoded piece. Resolves when the body ends.
 */
export async function stream(path, onChunk, signal, headers) {
  const r = await request(path, { signal, headers });
  if (!r.ok) {
    const text = await r.text();
    let msg = text;
    try { msg = JSON.parse(text).error || text; } catch { /* plain */ }
    throw new ApiError(r.status, msg.trim() || r.statusText);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onChunk(value);
  }
}
