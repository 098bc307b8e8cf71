// Recall console: plain JavaScript, no build step, nothing fetched from
// elsewhere. Routes: #/ (sessions), #/t/<tenant>/s/<session>, #/parked.
"use strict";

const state = { token: sessionStorage.getItem("recall.token") || "", who: null, tenant: "", live: null, page: null, refresh: null };

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
  const resp = await fetch(path, Object.assign({}, opts, { headers }));
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

// ---------- markdown (escaped by construction: text nodes only) ----------

function inline(text) {
  const out = [];
  const re = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*|_[^_\s][^_]*_)/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    if (t.startsWith("`")) out.push(el("code", { text: t.slice(1, -1) }));
    else if (t.startsWith("**")) out.push(el("strong", { text: t.slice(2, -2) }));
    else out.push(el("em", { text: t.slice(1, -1) }));
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function markdown(src) {
  const root = el("div", { class: "markdown" });
  const lines = (src || "").split("\n");
  let list = null, para = null;
  const flush = () => { list = null; para = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
      root.append(el("pre", {}, el("code", { text: code.join("\n") })));
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) { flush(); root.append(el("h" + Math.min(h[1].length + 1, 6), {}, inline(h[2]))); continue; }
    const li = /^\s*(?:[-*+]|\d+\.)\s+(.*)$/.exec(line);
    if (li) {
      if (!list) { list = el(/^\s*\d/.test(line) ? "ol" : "ul"); root.append(list); para = null; }
      list.append(el("li", {}, inline(li[1])));
      continue;
    }
    if (line.trim() === "") { flush(); continue; }
    if (line.startsWith(">")) { flush(); root.append(el("blockquote", {}, inline(line.replace(/^>\s?/, "")))); continue; }
    if (!para) { para = el("p"); root.append(para); list = null; } else para.append(" ");
    para.append(...inline(line));
  }
  return root;
}

// ---------- side-by-side diff (longest common subsequence of lines) ----------

function diffLines(a, b) {
  const n = a.length, m = b.length;
  if (n * m > 4e6) return [...a.map(l => ["-", l]), ...b.map(l => ["+", l])];
  const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  const ops = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { ops.push(["=", a[i]]); i++; j++; }
    else if (dp[i + 1][j] >= dp[i][j + 1]) ops.push(["-", a[i++]]);
    else ops.push(["+", b[j++]]);
  }
  while (i < n) ops.push(["-", a[i++]]);
  while (j < m) ops.push(["+", b[j++]]);
  return ops;
}

function sideBySide(oldText, newText) {
  const lines = t => (t ? t.split("\n") : []);
  const ops = diffLines(lines(oldText), lines(newText));
  const body = el("tbody");
  let ln = 0, rn = 0, k = 0;
  while (k < ops.length) {
    if (ops[k][0] === "=") {
      ln++; rn++;
      body.append(el("tr", {}, el("td", { class: "n", text: ln }), el("td", { text: ops[k][1] }), el("td", { class: "n", text: rn }), el("td", { text: ops[k][1] })));
      k++;
      continue;
    }
    const dels = [], adds = [];
    while (k < ops.length && ops[k][0] !== "=") (ops[k][0] === "-" ? dels : adds).push(ops[k++][1]);
    for (let r = 0; r < Math.max(dels.length, adds.length); r++) {
      const d = r < dels.length, a = r < adds.length;
      body.append(el("tr", {},
        el("td", { class: "n", text: d ? ++ln : "" }), el("td", { class: d ? "del" : "", text: d ? dels[r] : "" }),
        el("td", { class: "n", text: a ? ++rn : "" }), el("td", { class: a ? "add" : "", text: a ? adds[r] : "" })));
    }
  }
  return el("table", { class: "diff" }, body);
}

// ---------- chart ----------

function chart(page) {
  const W = 1000, H = 260, L = 60, R = 10, T = 12, B = 28;
  const pts = page.series;
  if (!pts.length) return el("p", { class: "muted", text: "No messages yet." });
  const minSeq = pts[0].seq, maxSeq = Math.max(pts[pts.length - 1].seq, minSeq + 1);
  const maxTok = Math.max(1, ...pts.map(p => p.tokens));
  const x = s => L + (W - L - R) * (s - minSeq) / (maxSeq - minSeq);
  const y = t => T + (H - T - B) * (1 - t / maxTok);
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `context tokens over ${page.records} records; peak ${maxTok} tokens; ${page.extractions.length} extractions, ${page.compactions.length} compactions` });
  for (const frac of [0, 0.5, 1]) {
    const t = Math.round(maxTok * frac);
    g.append(svg("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), stroke: "#e3e7eb" }));
    g.append(svg("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end", "font-size": 11, fill: "#5d6875" }, num(t)));
  }
  g.append(svg("text", { x: L, y: H - 8, "font-size": 11, fill: "#5d6875" }, "seq " + minSeq));
  g.append(svg("text", { x: W - R, y: H - 8, "text-anchor": "end", "font-size": 11, fill: "#5d6875" }, "seq " + maxSeq));
  for (const m of page.extractions) {
    if (m.seq < minSeq) continue;
    g.append(svg("line", { class: "mark-extraction", x1: x(m.seq), x2: x(m.seq), y1: T, y2: H - B, stroke: "#1b7f3b", "stroke-dasharray": "4 3" }, svg("title", {}, m.label + " covers seq " + m.seq)));
  }
  for (const m of page.compactions) {
    g.append(svg("line", { class: "mark-compaction", x1: x(m.seq), x2: x(m.seq), y1: T, y2: H - B, stroke: "#b3261e", "stroke-width": 2 }, svg("title", {}, m.label + " at seq " + m.seq)));
  }
  g.append(svg("polyline", { points: pts.map(p => `${x(p.seq).toFixed(1)},${y(p.tokens).toFixed(1)}`).join(" "), fill: "none", stroke: "#1f5fbf", "stroke-width": 1.5 }));
  return el("div", { class: "chart" }, g,
    el("p", { class: "legend" }, "Estimated context tokens after each record (blue); ",
      el("span", { class: "ex", text: "dashed green: memory revisions (what they cover)" }), "; ",
      el("span", { class: "co", text: "red: compaction boundaries" }), "."));
}

// ---------- pages ----------

async function sessionsPage() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "").get("q") || "";
  const search = el("input", { type: "search", id: "search", placeholder: "Search id, name, tag, summary  ( / )", value: q, "aria-label": "Search sessions" });
  const table = el("div", { id: "sessions" }, el("p", { class: "muted", text: "Loading…" }));
  // Pages follow the session ids (a cursor); "More" appends the next one.
  let rows = [];
  const list = (cursor) => api(`/console/api/tenants/${encodeURIComponent(state.tenant)}/sessions?q=${encodeURIComponent(search.value)}&cursor=${encodeURIComponent(cursor)}`);
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
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => load().catch(showError), 200); });
  setMain(el("h1", { text: `Sessions of ${state.tenant}` }), el("div", { class: "toolbar" }, search), table);
  state.refresh = () => load().catch(() => {});
  await load();
}

function sessionsTable(rows) {
  if (!rows.length) return el("p", { class: "muted", text: "No sessions." });
  const body = el("tbody");
  for (const r of rows) {
    const href = `#/t/${encodeURIComponent(state.tenant)}/s/${encodeURIComponent(r.session)}`;
    body.append(el("tr", { "data-session": r.session },
      el("td", {}, el("a", { href, text: r.name || r.session }), r.name ? el("div", { class: "muted", text: r.session }) : null),
      el("td", {}, (r.tags || []).map(t => el("span", { class: "tag", text: t }))),
      el("td", { class: "num", text: num(r.records) }),
      el("td", { title: fmtTime(r.last_activity), text: ago(r.last_activity) }),
      el("td", { class: "num", text: r.context_tokens ? num(r.context_tokens) : "—" }),
      el("td", { class: "num", text: r.memory_revision ? "r" + r.memory_revision : "—" }),
      el("td", { class: "num", text: r.last_summarized_seq ? num(r.last_summarized_seq) + " / " + num(r.last_seq) : "—" }),
      el("td", {}, r.extracting ? el("span", { class: "badge running", text: "extracting" }) : "")));
  }
  return el("table", {}, el("thead", {}, el("tr", {},
    el("th", { text: "Session" }), el("th", { text: "Tags" }), el("th", { class: "num", text: "Records" }),
    el("th", { text: "Last activity" }), el("th", { class: "num", title: "the trigger's count at the last extraction request", text: "Context tokens" }), el("th", { class: "num", text: "Memory" }), el("th", { class: "num", text: "Covered / last seq" }), el("th", { text: "State" }))), body);
}

async function sessionPage(tenant, session) {
  const base = `/console/api/tenants/${encodeURIComponent(tenant)}/sessions/${encodeURIComponent(session)}`;
  const started = performance.now();
  const page = await api(base);
  const fetched = performance.now();
  const header = el("div", {},
    el("p", {}, el("a", { href: "#/", text: "← Sessions" })),
    el("h1", { text: page.index && page.index.name ? page.index.name : session }),
    page.index && page.index.summary ? el("p", { text: page.index.summary }) : null,
    el("p", {}, ((page.index && page.index.tags) || []).map(t => el("span", { class: "tag", text: t }))),
    el("dl", { class: "facts" },
      el("dt", { text: "Session" }), el("dd", { text: session }),
      el("dt", { text: "Records" }), el("dd", { id: "records", text: num(page.records) + (page.partial ? " read so far (a long transcript is read 64 MiB per request: reload to read on)" : "") }),
      el("dt", { text: "Memory" }), el("dd", { id: "memory-revision", text: page.memory ? `revision ${page.memory.revision}, covers seq ${page.memory.last_summarized_seq}, ${page.memory.extractions} extractions` : "none yet" }),
      el("dt", { text: "Extraction" }), el("dd", {}, page.extracting ? el("span", { class: "badge running", text: "running" }) : "idle")));
  const preview = el("div", { id: "preview" }, el("p", { class: "muted", text: "What a compaction would keep if the agent asked now (no LLM call, nothing is changed)." }));
  const previewButton = el("button", { type: "button", id: "preview-button", text: "Preview compaction" });
  previewButton.addEventListener("click", async () => {
    previewButton.disabled = true;
    try { preview.replaceChildren(previewView(await api(base + "/preview", { method: "POST" }))); }
    catch (err) { preview.replaceChildren(el("p", { class: "error", text: err.message })); }
    finally { previewButton.disabled = false; }
  });
  setMain(header,
    el("h2", { text: "Context over the transcript" }), chart(page),
    el("div", { class: "grid" },
      el("section", { "aria-labelledby": "memory-h" }, el("h2", { id: "memory-h", text: "Memory" }),
        el("div", { class: "panel", id: "memory" }, page.memory ? markdown(page.memory.notes) : el("p", { class: "muted", text: "No memory yet." }))),
      el("section", { "aria-labelledby": "timeline-h" }, el("h2", { id: "timeline-h", text: "Timeline" }), timeline(page.timeline))),
    el("h2", { text: "Revisions" }), revisions(page.history),
    el("h2", { text: "Compaction preview" }), el("div", { class: "toolbar" }, previewButton), preview);
  const main = document.getElementById("main");
  main.dataset.fetchMs = Math.round(fetched - started);
  main.dataset.loadedMs = Math.round(performance.now() - started);
  state.refresh = () => sessionPage(tenant, session).catch(() => {});
}

function timeline(items) {
  if (!items.length) return el("p", { class: "muted", id: "timeline", text: "No extraction or compaction events yet." });
  const list = el("ol", { class: "timeline", id: "timeline", reversed: true });
  for (const it of items.slice().reverse()) {
    const d = it.data || {};
    let what = it.kind.replaceAll("_", " ");
    let cls = "";
    if (it.kind === "extraction_completed") { what += ` — revision ${d.revision}, covers seq ${d.covered_seq}${d.skipped ? " (already covered)" : ""}`; cls = "ok"; }
    else if (it.kind === "extraction_failed") { what += ` — ${d.reason}: ${d.error}${d.parked ? " (parked)" : ""}`; cls = "bad"; }
    else if (it.kind === "extraction_requested") what += ` — up to seq ${d.up_to_seq} (${d.reason || "threshold"})`;
    else if (it.kind === "compaction_served") what += ` — ${d.outcome}, ${num(d.tokens_before)} → ${num(d.tokens_after)} tokens, kept ${d.kept_messages}`;
    list.append(el("li", { "data-kind": it.kind }, el("time", { datetime: it.time, text: fmtTime(it.time) }), cls ? el("span", { class: "badge " + cls, text: what }) : what));
  }
  return list;
}

function revisions(history) {
  if (history.length === 0) return el("p", { class: "muted", text: "No revisions yet." });
  const opts = sel => history.map((h, i) => el("option", { value: i, selected: i === sel, text: `r${h.revision} — ${fmtTime(h.time)} — covers seq ${h.last_summarized_seq}` }));
  const left = el("select", { id: "rev-left", "aria-label": "Older revision" }, opts(Math.max(0, history.length - 2)));
  const right = el("select", { id: "rev-right", "aria-label": "Newer revision" }, opts(history.length - 1));
  const out = el("div", { class: "panel", id: "diff" });
  const render = () => out.replaceChildren(
    left.value === right.value && history.length === 1
      ? sideBySide("", history[0].notes)
      : sideBySide(history[+left.value].notes, history[+right.value].notes));
  left.addEventListener("change", render);
  right.addEventListener("change", render);
  render();
  return el("div", {}, el("div", { class: "toolbar" }, el("label", {}, "From ", left), el("label", {}, "to ", right)), out);
}

function previewView(r) {
  const text = r.summary && r.summary.message && r.summary.message.content ? r.summary.message.content.map(b => b.text || "").join("\n") : "";
  const kept = el("ol", { class: "kept" });
  for (const e of r.kept || []) {
    const m = e.data || {};
    const c = Array.isArray(m.content) ? m.content.map(b => b.text || (b.type === "tool_use" ? `[tool_use ${b.name}]` : b.type === "tool_result" ? "[tool_result]" : "")).join(" ") : String(m.content || "");
    kept.append(el("li", {}, el("strong", { text: m.role + ": " }), c.slice(0, 200)));
  }
  return el("div", {},
    el("p", {}, el("span", { class: "badge " + (r.served ? "ok" : "bad"), text: r.outcome }), " ",
      r.served ? `${num(r.tokens_before)} → ${num(r.tokens_after)} tokens; ${r.kept_count} messages kept after seq ${r.last_summarized_seq || 0}` : (r.reason || "")),
    text ? el("details", {}, el("summary", { text: "Summary message" }), el("pre", { class: "plain", text })) : null,
    r.kept_count ? el("details", {}, el("summary", { text: `Kept messages (${r.kept_count})` }), kept) : null);
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
    } catch (err) { btn.replaceWith(el("span", { class: "error", text: err.message })); }
  });
  return btn;
}

function sessionLink(tenant, session) {
  return el("a", { href: `#/t/${encodeURIComponent(tenant)}/s/${encodeURIComponent(session)}`, text: session });
}

async function parkedPage() {
  const q = state.who.operator ? "?tenant=" + encodeURIComponent(state.tenant) : "";
  const data = await api("/console/api/parked" + q);
  const rows = data.parked;
  const table = rows.length === 0 ? el("p", { class: "muted", id: "parked", text: "Nothing is parked: every extraction request completed." }) : (() => {
    const body = el("tbody");
    for (const p of rows) {
      body.append(el("tr", {},
        el("td", { text: fmtTime(p.parked_at) }), el("td", { text: p.request.tenant }),
        el("td", {}, sessionLink(p.request.tenant, p.request.session)),
        el("td", { class: "num", text: p.request.up_to_seq }), el("td", { text: p.reason }), el("td", { class: "num", text: p.attempts }),
        el("td", { text: (p.error || "").slice(0, 160) }), el("td", {}, replayButton(data.can_replay, "extraction", p.request.tenant, p.request.session))));
    }
    return el("table", { id: "parked" }, el("thead", {}, el("tr", {}, ["Parked", "Tenant", "Session", "Up to seq", "Reason", "Attempts", "Error", ""].map(h => el("th", { text: h })))), body);
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
  setMain(el("h1", { text: "Parked extractions" }),
    el("p", { class: "muted", text: data.can_replay ? "Requests that failed permanently. Replay re-queues a session's parked requests." : "Requests that failed permanently. An operator token can replay them." }), table,
    el("h2", { text: "Parked long-term memory commits" }),
    el("p", { class: "muted", text: "Commits that kept failing; their batches wait, uncommitted. " + (data.can_replay ? "Replay re-queues a session's parked commits." : "An operator token can replay them.") }), ctable);
  state.refresh = () => parkedPage().catch(() => {});
}

// ---------- live updates (server-sent events over fetch, so the token can be sent) ----------

async function connectLive() {
  if (state.live) state.live.abort();
  const ctrl = new AbortController();
  state.live = ctrl;
  const badge = document.getElementById("live");
  const q = state.who.operator ? "?tenant=" + encodeURIComponent(state.tenant) : "";
  try {
    const resp = await fetch("/console/api/live" + q, { headers: state.token ? { Authorization: "Bearer " + state.token } : {}, signal: ctrl.signal });
    if (!resp.ok || !resp.body) throw new Error(resp.statusText);
    badge.textContent = "● live"; badge.classList.add("on");
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
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
        if (kind && data) onLive(kind, JSON.parse(data));
      }
    }
  } catch (err) {
    if (ctrl.signal.aborted) return;
  }
  badge.textContent = "○ reconnecting"; badge.classList.remove("on");
  setTimeout(() => { if (state.live === ctrl) connectLive(); }, 2000);
}

let liveTimer = null;
function onLive(kind, ev) {
  const route = parseRoute();
  const relevant = route.name === "session" ? ev.session === route.session && ev.tenant === route.tenant : true;
  if (!relevant || !state.refresh) return;
  clearTimeout(liveTimer);
  liveTimer = setTimeout(() => state.refresh && state.refresh(), 250);
}

// ---------- routing and start ----------

function parseRoute() {
  const h = location.hash.replace(/^#/, "").split("?")[0];
  let m;
  if ((m = /^\/t\/([^/]+)\/s\/([^/]+)$/.exec(h))) return { name: "session", tenant: decodeURIComponent(m[1]), session: decodeURIComponent(m[2]) };
  if (h === "/parked") return { name: "parked" };
  return { name: "sessions" };
}

async function route() {
  const r = parseRoute();
  state.refresh = null;
  delete document.getElementById("main").dataset.loadedMs;
  document.getElementById("nav-sessions").toggleAttribute("aria-current", r.name !== "parked");
  document.getElementById("nav-parked").toggleAttribute("aria-current", r.name === "parked");
  if (r.name === "sessions" || r.name === "parked") { /* keep the chosen tenant */ }
  try {
    if (r.name === "session") await sessionPage(r.tenant, r.session);
    else if (r.name === "parked") await parkedPage();
    else await sessionsPage();
    document.getElementById("main").focus({ preventScroll: true });
  } catch (err) {
    if (err.status === 401) return login();
    showError(err);
  }
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
    select.onchange = () => { state.tenant = select.value; sessionStorage.setItem("recall.tenant", state.tenant); connectLive(); location.hash = "#/"; route(); };
  }
  connectLive();
  await route();
}

window.addEventListener("hashchange", route);
document.addEventListener("keydown", ev => {
  const s = document.getElementById("search");
  if (ev.key === "/" && s && document.activeElement !== s && !(document.activeElement instanceof HTMLInputElement)) { ev.preventDefault(); s.focus(); }
});
start();
