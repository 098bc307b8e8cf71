// Recall console: plain JavaScript, no build step, nothing fetched from
// elsewhere. Routes: #/ (sessions, ?q= the search), #/t/<tenant>/s/<session>,
// #/parked. markdown.js, live.js and session.js are loaded before this.
"use strict";

const state = { token: sessionStorage.getItem("recall.token") || "", who: null, tenant: "", refresh: null, parked: new Set() };

// ---------- helpers ----------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (state.token) headers.Authorization = "Bearer " + state.token;
  // A data call never waits forever (it would if it queued behind
  // streams): 30 s, then an error the page shows.
  const resp = await fetch(path, Object.assign({ signal: AbortSignal.timeout(30000) }, opts, { headers }));
  if (resp.status === 401) {
    const err = new Error("unauthorized");
    err.status = 401;
    throw err;
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = new Error(body.detail || resp.statusText);
    err.status = resp.status;
    throw err;
  }
  return body;
}

function fmtTime(s) {
  if (!s || s.startsWith("0001")) return "—";
  const d = new Date(s);
  return d.toLocaleString();
}

function ago(s) {
  if (!s || s.startsWith("0001")) return "—";
  const secs = Math.max(0, (Date.now() - new Date(s).getTime()) / 1000);
  if (secs < 60) return Math.round(secs) + " s ago";
  if (secs < 3600) return Math.round(secs / 60) + " min ago";
  if (secs < 86400) return Math.round(secs / 3600) + " h ago";
  return Math.round(secs / 86400) + " d ago";
}

function num(n) { return (n || 0).toLocaleString("en-US"); }

function setMain(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

function showError(err) {
  setMain(el("p", { class: "error", role: "alert", text: "Error: " + err.message }));
}

// ---------- pages ----------

async function sessionsPage() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "").get("q") || "";
  const search = el("input", { type: "search", id: "search", placeholder: "Search id, name, tag, summary, memory  ( / )", value: q, "aria-label": "Search sessions" });
  const table = el("div", { id: "sessions" }, el("p", { class: "muted", text: "Loading…" }));
  // Pages follow the session ids (a cursor); "More" appends the next one.
  let rows = [];
  const list = (cursor, limit) => api(`/console/api/tenants/${encodeURIComponent(state.tenant)}/sessions?q=${encodeURIComponent(search.value)}&cursor=${encodeURIComponent(cursor)}` + (limit ? "&limit=" + limit : ""));
  const show = (data) => {
    const more = data.next_cursor ? el("button", { type: "button", id: "more-sessions", text: `More (${num(rows.length)} of ${num(data.total)} shown)` }) : null;
    if (more) more.addEventListener("click", () => list(data.next_cursor).then(next => { rows = rows.concat(next.sessions); show(next); }).catch(showError));
    table.replaceChildren(sessionsTable(rows), more || "");
  };
  const load = async () => {
    const data = await list("");
    rows = data.sessions;
    show(data);
  };
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      history.replaceState(null, "", search.value ? "#/?q=" + encodeURIComponent(search.value) : "#/");
      load().catch(showError);
    }, 200);
  });
  setMain(el("h1", { text: `Sessions of ${state.tenant}` }), el("div", { class: "toolbar" }, search), table);
  // A live update reads again as many rows as are shown (one call holds
  // at most 500), so the pages "More" appended stay.
  state.refresh = async () => {
    if (rows.length > 500) return;
    try {
      const data = await list("", Math.max(200, rows.length));
      rows = data.sessions;
      show(data);
    } catch (err) { /* the next update tries again */ }
  };
  await load();
}

function sessionsTable(rows) {
  if (!rows.length) return el("p", { class: "muted", text: "No sessions." });
  const body = el("tbody");
  for (const r of rows) {
    const href = `#/t/${encodeURIComponent(state.tenant)}/s/${encodeURIComponent(r.session)}`;
    body.append(el("tr", { "data-session": r.session },
      el("td", {}, el("a", { href, text: r.name || r.session }), r.name ? el("div", { class: "muted", text: r.session }) : null,
        r.match ? el("div", { class: "match", text: "memory: …" + r.match + "…" }) : null),
      el("td", {}, (r.tags || []).map(t => el("span", { class: "tag", text: t }))),
      el("td", { class: "num", text: num(r.records) }),
      el("td", { title: fmtTime(r.last_activity), text: ago(r.last_activity) }),
      el("td", { class: "num", text: r.context_tokens ? num(r.context_tokens) : "—" }),
      el("td", { class: "num", title: r.memory_revision ? "KV revision r" + r.memory_revision : null, text: r.extractions ? num(r.extractions) : "—" }),
      el("td", { class: "num", text: r.last_summarized_seq ? num(r.last_summarized_seq) + " of " + num(r.last_seq) : "—" }),
      el("td", {}, r.extracting ? el("span", { class: "badge running", text: "extracting" }) : "",
        state.parked.has(state.tenant + "/" + r.session) ? el("a", { class: "badge bad", href: "#/parked", text: "failed (parked)" }) : "")));
  }
  return el("table", {}, el("thead", {}, el("tr", {},
    el("th", { text: "Session" }), el("th", { text: "Tags" }), el("th", { class: "num", text: "Records" }),
    el("th", { text: "Last activity" }), el("th", { class: "num", title: "the trigger's count at the last extraction request", text: "Context tokens" }), el("th", { class: "num", title: "extractions of the session's memory", text: "Extractions" }), el("th", { class: "num", title: "stream sequences of the RECALL_TRANSCRIPT stream, shared by every session", text: "Memory covers (stream seq)" }), el("th", { text: "State" }))), body);
}

// replayButton re-queues one session's parked work of kind ("extraction" or "commit").
function replayButton(canReplay, kind, tenant, session) {
  if (!canReplay) return null;
  const btn = el("button", { type: "button", class: "secondary", text: "Replay" });
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    try {
      const r = await api("/console/api/parked/replay", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tenant, session, kind }) });
      btn.replaceWith(el("span", { class: "badge ok", text: `replayed ${r.replayed}` }));
      refreshParkedCount();
    } catch (err) { btn.replaceWith(el("span", { class: "error", text: err.message })); }
  });
  return btn;
}

// replayAll re-queues every replayable parked extraction, a session at a
// time (operators).
function replayAll(data) {
  const sessions = [...new Map(data.parked.filter(p => !p.invalid && p.tenant && p.session).map(p => [p.tenant + "/" + p.session, p])).values()];
  if (!data.can_replay || !sessions.length) return null;
  const btn = el("button", { type: "button", id: "replay-all", text: `Replay all (${sessions.length} session${sessions.length === 1 ? "" : "s"})` });
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    let n = 0;
    try {
      for (const p of sessions) {
        const r = await api("/console/api/parked/replay", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tenant: p.tenant, session: p.session, kind: "extraction" }) });
        n += r.replayed;
        btn.textContent = `Replayed ${n}…`;
      }
      await parkedPage();
    } catch (err) { btn.replaceWith(el("span", { class: "error", text: `replayed ${n}, then: ${err.message}` })); }
  });
  return el("div", { class: "toolbar" }, btn);
}

// setParked keeps which sessions have parked work and shows the count in
// the navigation.
function setParked(data) {
  state.parked = new Set(data.parked.map(p => p.tenant + "/" + p.session));
  const n = data.parked.length + (data.commits || []).length;
  const count = document.getElementById("parked-count");
  count.textContent = n ? String(n) : "";
  count.hidden = !n;
}

let parkedTimer = null;
function refreshParkedCount() {
  clearTimeout(parkedTimer);
  parkedTimer = setTimeout(() => api("/console/api/parked").then(setParked).catch(() => {}), 500);
}

function sessionLink(tenant, session) {
  return el("a", { href: `#/t/${encodeURIComponent(tenant)}/s/${encodeURIComponent(session)}`, text: session });
}

// parkedPage lists parked work: an operator's every tenant's (the
// invalid.<seq> entries too), a tenant's its own. An entry whose record
// lacks its tenant or session shows the ones its subject names.
async function parkedPage() {
  const data = await api("/console/api/parked");
  setParked(data);
  const rows = data.parked;
  const table = rows.length === 0 ? el("p", { class: "muted", id: "parked", text: "Nothing is parked: every extraction request completed." }) : (() => {
    const body = el("tbody");
    for (const p of rows) {
      const where = p.session ? sessionLink(p.tenant, p.session) : el("span", { class: "muted", text: "unknown" });
      body.append(el("tr", { "data-key": p.key },
        el("td", { text: fmtTime(p.parked_at) }), el("td", { text: p.tenant || "unknown" }),
        el("td", {}, where, p.derived ? el("div", { class: "muted", text: "from the subject " + p.subject }) : null),
        el("td", { class: "num", text: p.request.up_to_seq }), el("td", {}, p.reason, p.invalid ? el("span", { class: "badge bad", text: "invalid record" }) : null),
        el("td", { class: "num", text: p.attempts }), el("td", { text: (p.error || "").slice(0, 160) }),
        el("td", {}, p.invalid ? el("span", { class: "muted", text: "not replayable: recall extract --failed" }) : replayButton(data.can_replay, "extraction", p.tenant, p.session))));
    }
    return el("table", { id: "parked" }, el("thead", {}, el("tr", {}, ["Parked", "Tenant", "Session", "Up to stream seq", "Reason", "Attempts", "Error", ""].map(h => el("th", { text: h })))), body);
  })();
  const commits = data.commits || [];
  const ctable = commits.length === 0 ? el("p", { class: "muted", id: "parked-commits", text: "Nothing is parked: every long-term memory commit went through." }) : (() => {
    const body = el("tbody");
    for (const p of commits) {
      body.append(el("tr", {},
        el("td", { text: fmtTime(p.parked_at) }), el("td", { text: p.tenant }), el("td", { text: p.user }),
        el("td", {}, sessionLink(p.tenant, p.session)),
        el("td", { class: "num", text: p.up_to }), el("td", { text: p.reason }), el("td", { class: "num", text: p.attempts }),
        el("td", { text: (p.error || "").slice(0, 160) }), el("td", {}, replayButton(data.can_replay, "commit", p.tenant, p.session))));
    }
    return el("table", { id: "parked-commits" }, el("thead", {}, el("tr", {}, ["Parked", "Tenant", "User", "Session", "Up to seq", "Reason", "Attempts", "Error", ""].map(h => el("th", { text: h })))), body);
  })();
  setMain(el("h1", { text: "Parked extractions" }), replayAll(data),
    el("p", { class: "muted", text: data.can_replay ? "Requests that failed permanently. Replay re-queues a session's parked requests." : "Requests that failed permanently. An operator token can replay them." }), table,
    el("h2", { text: "Parked long-term memory commits" }),
    el("p", { class: "muted", text: "Commits that kept failing; their batches wait, uncommitted. " + (data.can_replay ? "Replay re-queues a session's parked commits." : "An operator token can replay them.") }), ctable);
  state.refresh = () => parkedPage().catch(() => {});
}

// ---------- routing and start ----------

function parseRoute() {
  const h = location.hash.replace(/^#/, "").split("?")[0];
  let m;
  if ((m = /^\/t\/([^/]+)\/s\/([^/]+)$/.exec(h))) return { name: "session", tenant: decodeURIComponent(m[1]), session: decodeURIComponent(m[2]) };
  if ((m = /^\/t\/([^/]+)\/u\/([^/]+)$/.exec(h))) return { name: "user", tenant: decodeURIComponent(m[1]), user: decodeURIComponent(m[2]) };
  if (h === "/parked") return { name: "parked" };
  if (h === "/overview") return { name: "overview" };
  return { name: "sessions" };
}

async function route() {
  const r = parseRoute();
  state.refresh = null;
  delete document.getElementById("main").dataset.loadedMs;
  for (const [id, names] of [["nav-sessions", ["sessions", "session", "user"]], ["nav-parked", ["parked"]], ["nav-overview", ["overview"]]])
    names.includes(r.name) ? document.getElementById(id).setAttribute("aria-current", "page") : document.getElementById(id).removeAttribute("aria-current");
  if (r.name === "sessions" || r.name === "parked") { /* keep the chosen tenant */ }
  try {
    if (r.name === "session") await sessionPage(r.tenant, r.session);
    else if (r.name === "parked") await parkedPage();
    else if (r.name === "user") await userPage(r.tenant, r.user);
    else if (r.name === "overview") await overviewPage();
    else await sessionsPage();
    document.getElementById("main").focus({ preventScroll: true });
  } catch (err) {
    if (err.status === 401) return login();
    showError(err);
  }
}

// pickTenant is the operator's choice of the tenant the pages show.
function pickTenant(tenant) {
  state.tenant = tenant;
  sessionStorage.setItem("recall.tenant", tenant);
  const select = document.getElementById("tenant");
  if (select) select.value = tenant;
}

function login(message) {
  const form = document.getElementById("login-template").content.cloneNode(true);
  setMain(form);
  if (message) document.getElementById("login-error").textContent = message;
  document.getElementById("login").addEventListener("submit", async ev => {
    ev.preventDefault();
    state.token = document.getElementById("token").value.trim();
    sessionStorage.setItem("recall.token", state.token);
    await start();
  });
  document.getElementById("token").focus();
}

async function start() {
  try {
    state.who = await api("/console/api/whoami");
  } catch (err) {
    if (err.status === 401) return login(state.token ? "That token was not accepted." : "");
    return showError(err);
  }
  const who = state.who;
  state.tenant = who.operator ? (sessionStorage.getItem("recall.tenant") || who.tenants[0] || "default") : who.tenant;
  if (!who.tenants.includes(state.tenant) && who.tenants.length) state.tenant = who.tenants[0];
  document.getElementById("who").textContent = who.operator ? "operator" : "tenant " + who.tenant;
  const picker = document.getElementById("tenant-picker");
  const select = document.getElementById("tenant");
  if (who.operator && who.tenants.length > 1) {
    select.replaceChildren(...who.tenants.map(t => el("option", { value: t, selected: t === state.tenant, text: t })));
    picker.hidden = false;
    select.onchange = () => { pickTenant(select.value); location.hash = "#/"; route(); };
  }
  document.getElementById("nav-overview").hidden = !who.operator;
  liveStart();
  refreshParkedCount();
  await route();
}

window.addEventListener("hashchange", route);
document.addEventListener("keydown", ev => {
  const s = document.getElementById("search");
  if (ev.key === "/" && s && document.activeElement !== s && !(document.activeElement instanceof HTMLInputElement)) { ev.preventDefault(); s.focus(); }
});
start();
