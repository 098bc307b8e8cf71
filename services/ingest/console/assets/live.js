// Recall console: live updates. A browser holds one stream per token,
// shared by all its tabs: browsers open at most six connections per host
// over HTTP/1.1, so a stream per tab starves the data calls. The tabs
// signed in with the same token talk over a BroadcastChannel; one of them,
// the leader, reads GET /console/api/live (server-sent events over fetch,
// so the token goes in a header) and passes each notification on. The
// leader says so every second; when it is silent for 3.5 s another tab
// takes over, and when two lead, the one that took over last stays (so a
// leader whose timers a background tab throttles steps down). A page
// leaving (pagehide, also into the back/forward cache) closes its stream
// and channel; a page coming back (pageshow) rejoins and refreshes.
"use strict";

const live = { id: Math.random().toString(36).slice(2), chan: null, leader: false, since: 0, heard: 0, leaderId: "", ctrl: null, on: false, timer: null };

// tokenKey names the channel of a token without spelling it out (FNV-1a).
function tokenKey(token) {
  let h1 = 0x811c9dc5, h2 = 0x01000193;
  for (let i = 0; i < token.length; i++) {
    h1 = Math.imul(h1 ^ token.charCodeAt(i), 16777619) >>> 0;
    h2 = Math.imul(h2 ^ token.charCodeAt(i), 2246822519) >>> 0;
  }
  return h1.toString(16) + h2.toString(16);
}

function liveStart() {
  liveStop();
  if (typeof BroadcastChannel === "undefined") { live.chan = { postMessage() {}, close() {} }; lead(); return; }
  live.chan = new BroadcastChannel("recall-live-" + tokenKey(state.token || ""));
  live.chan.onmessage = ev => liveMessage(ev.data || {});
  live.heard = Date.now() - 3300; // a leader answers hello at once; else take over within ~0.3 s
  setBadge(false, "○ connecting");
  live.chan.postMessage({ t: "hello", id: live.id });
  live.timer = setInterval(liveTick, 1000);
  setTimeout(liveTick, 300);
}

function liveStop() {
  clearInterval(live.timer);
  live.timer = null;
  if (!live.chan) return;
  if (live.leader) { live.chan.postMessage({ t: "bye", id: live.id }); resign(); }
  live.chan.close();
  live.chan = null;
  setBadge(false, "○ offline");
}

function liveTick() {
  if (!live.chan) return;
  if (live.leader) heartbeat();
  else if (Date.now() - live.heard > 3500) lead();
}

function heartbeat() { live.chan.postMessage({ t: "hb", id: live.id, since: live.since, on: live.on }); }

function liveMessage(m) {
  if (m.t === "hello") { if (live.leader) heartbeat(); return; }
  if (m.t === "hb") {
    if (live.leader) {
      if (m.since < live.since || (m.since === live.since && m.id > live.id)) return; // we stay
      resign();
    }
    live.leaderId = m.id; live.heard = Date.now();
    setBadge(m.on, m.on ? "● live" : "○ reconnecting");
    return;
  }
  if (m.t === "bye" && m.id === live.leaderId) { live.heard = 0; setTimeout(liveTick, Math.random() * 300); return; }
  if (m.t === "ev") onLive(m.kind, m.data);
}

function lead() {
  live.leader = true; live.since = Date.now(); live.leaderId = live.id;
  heartbeat();
  connectLive();
}

function resign() {
  live.leader = false; live.on = false;
  if (live.ctrl) live.ctrl.abort();
  live.ctrl = null;
}

function setBadge(on, text) {
  const badge = document.getElementById("live");
  badge.textContent = text;
  badge.classList.toggle("on", on);
  badge.dataset.role = live.leader ? "leader" : "follower";
}

// connectLive reads the stream while this tab leads: an operator's
// carries every tenant (each tab keeps those of the tenant it shows).
async function connectLive() {
  const ctrl = new AbortController();
  live.ctrl = ctrl;
  let wait = 2000;
  try {
    const resp = await fetch("/console/api/live", { headers: state.token ? { Authorization: "Bearer " + state.token } : {}, signal: ctrl.signal });
    if (resp.status === 429 || resp.status === 503) wait = 1000 * (+resp.headers.get("Retry-After") || 2);
    if (!resp.ok || !resp.body) throw new Error(resp.statusText);
    live.on = true; setBadge(true, "● live"); heartbeat();
    await readEvents(resp.body.getReader(), (kind, data) => {
      live.chan.postMessage({ t: "ev", kind, data });
      onLive(kind, data);
    });
  } catch (err) {
    if (ctrl.signal.aborted) return;
  }
  if (live.ctrl !== ctrl) return;
  live.on = false; setBadge(false, "○ reconnecting"); heartbeat();
  setTimeout(() => { if (live.ctrl === ctrl && live.leader) connectLive(); }, wait);
}

// readEvents calls fn with each server-sent event of a stream.
async function readEvents(reader, fn) {
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let kind = "", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (kind && data) fn(kind, JSON.parse(data));
    }
  }
}

let liveTimer = null;
function onLive(kind, ev) {
  if (state.who && state.who.operator && ev.tenant !== state.tenant) return;
  if (kind === "extraction_failed") refreshParkedCount();
  const route = parseRoute();
  const relevant = route.name === "session" ? ev.session === route.session && ev.tenant === route.tenant : true;
  if (!relevant || !state.refresh) return;
  clearTimeout(liveTimer);
  liveTimer = setTimeout(() => state.refresh && state.refresh(), 250);
}

window.addEventListener("pagehide", () => liveStop());
window.addEventListener("pageshow", ev => {
  if (!ev.persisted || !state.who) return;
  liveStart();
  if (state.refresh) state.refresh();
});
