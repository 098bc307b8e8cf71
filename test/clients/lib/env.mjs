// env.mjs: what the client checks talk to — the gateway, the scripted
// upstream's request log, Recall's HTTP edge — and small helpers over them.
import { fail } from "./check.mjs";

export function need(name) {
  const v = process.env[name];
  if (!v) fail(`environment variable ${name} is not set (.ci/gateway-clients sets it)`);
  return v.replace(/\/$/, "");
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// poll calls fn until it returns a value other than undefined, or throws the
// last error (or a timeout) after ms.
export async function poll(what, ms, fn) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) {
      if (last) throw last;
      fail(`timed out after ${ms} ms waiting for ${what}`);
    }
    await sleep(200);
  }
}

// upstreamRequests is the scripted upstream's log (GET /_upstream/requests),
// bodies decoded (Go serves them as base64) and parsed when JSON.
export async function upstreamRequests(upstream) {
  const r = await fetch(`${upstream}/_upstream/requests`);
  if (!r.ok) fail(`GET ${upstream}/_upstream/requests: ${r.status}`, { body: await r.text() });
  const list = (await r.json()) || [];
  return list.map((q) => {
    const raw = typeof q.body === "string" ? Buffer.from(q.body, "base64").toString("utf8") : "";
    let json = null;
    try { json = raw ? JSON.parse(raw) : null; } catch { /* not JSON */ }
    return { ...q, raw, json, h: (name) => headerOf(q.header, name) };
  });
}

function headerOf(h, name) {
  for (const [k, v] of Object.entries(h || {})) if (k.toLowerCase() === name.toLowerCase()) return Array.isArray(v) ? v[0] : v;
  return undefined;
}

// token is the Recall tenant token of the run (RECALL_TOKEN; empty: open mode).
export const token = process.env.RECALL_TOKEN || "";
const auth = () => (token ? { authorization: `Bearer ${token}` } : {});
// recallHeaders are the headers a client of the gateway adds for Recall: the
// tenant token in x-recall-token when the run has tenants.
export const recallHeaders = () => (token ? { "x-recall-token": token } : {});

// recallJSON calls Recall's HTTP edge (with the tenant token when set) and
// returns the parsed answer, failing with the status and body otherwise.
export async function recallJSON(recall, method, path, body) {
  const r = await fetch(`${recall}${path}`, {
    method, headers: { ...auth(), ...(body === undefined ? {} : { "content-type": method === "PATCH" ? "application/merge-patch+json" : "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) fail(`${method} ${path} on Recall: ${r.status}`, { body: text.slice(0, 2000) });
  return text ? JSON.parse(text) : null;
}

// exportSession is the session's records as Recall exports them (JSONL), or
// null while Recall has none (404).
export async function exportSession(recall, session) {
  const r = await fetch(`${recall}/v1/sessions/${encodeURIComponent(session)}/export`, { headers: auth() });
  if (r.status === 404) return null;
  const text = await r.text();
  if (!r.ok) fail(`GET /v1/sessions/${session}/export: ${r.status}`, { body: text.slice(0, 2000) });
  return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

export const blocksOf = (m) => (typeof m.content === "string" ? [{ type: "text", text: m.content }] : Array.isArray(m.content) ? m.content : []);
