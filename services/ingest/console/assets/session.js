// Recall console: a session's page. It is built once; a live update
// fetches the page's data again and updates each part in place, so an
// open preview, the chosen revisions, the timeline filter and the
// transcript pages stay as they are.
"use strict";

// chart draws context tokens over the session's whole range of stream
// sequences (first..last record); marks outside the drawn range are
// clamped to the axis.
function chart(page) {
  const W = 1000, H = 260, L = 60, R = 10, T = 12, B = 28;
  const pts = page.series;
  if (!pts.length) return el("p", { class: "muted", text: "No messages yet." });
  const minSeq = Math.min(page.first_seq || pts[0].seq, pts[0].seq);
  const maxSeq = Math.max(page.last_seq || 0, pts[pts.length - 1].seq, minSeq + 1);
  const maxTok = Math.max(1, ...pts.map(p => p.tokens));
  const clamp = s => Math.min(maxSeq, Math.max(minSeq, s));
  const x = s => L + (W - L - R) * (clamp(s) - minSeq) / (maxSeq - minSeq);
  const y = t => T + (H - T - B) * (1 - t / maxTok);
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "data-first-seq": minSeq, "data-last-seq": maxSeq, "aria-label": `context tokens over ${page.records} records; peak ${maxTok} tokens; ${page.extractions.length} extractions, ${page.compactions.length} compactions` });
  for (const frac of [0, 0.5, 1]) {
    const t = Math.round(maxTok * frac);
    g.append(svg("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), stroke: "#e3e7eb" }));
    g.append(svg("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end", "font-size": 11, fill: "#5d6875" }, num(t)));
  }
  g.append(svg("text", { x: L, y: H - 8, "font-size": 11, fill: "#5d6875" }, `record 1 (stream seq ${num(minSeq)})`));
  g.append(svg("text", { x: W - R, y: H - 8, "text-anchor": "end", "font-size": 11, fill: "#5d6875" }, `record ${num(page.records)} (stream seq ${num(maxSeq)})`));
  for (const m of page.extractions) {
    g.append(svg("line", { class: "mark-extraction", x1: x(m.seq), x2: x(m.seq), y1: T, y2: H - B, stroke: "#1b7f3b", "stroke-dasharray": "4 3" }, svg("title", {}, `${m.label} covers record ${num(m.pos)} (stream seq ${num(m.seq)})`)));
  }
  for (const m of page.compactions) {
    g.append(svg("line", { class: "mark-compaction", x1: x(m.seq), x2: x(m.seq), y1: T, y2: H - B, stroke: "#b3261e", "stroke-width": 2 }, svg("title", {}, `${m.label} at record ${num(m.pos)} (stream seq ${num(m.seq)})`)));
  }
  g.append(svg("polyline", { points: pts.map(p => `${x(p.seq).toFixed(1)},${y(p.tokens).toFixed(1)}`).join(" "), fill: "none", stroke: "#1f5fbf", "stroke-width": 1.5 }));
  return el("div", { class: "chart" }, g,
    el("p", { class: "legend" }, "Estimated context tokens after each record (blue); ",
      el("span", { class: "ex", text: "dashed green: extractions (what the memory covers)" }), "; ",
      el("span", { class: "co", text: "red: compaction boundaries" }), "."));
}

function facts(page) {
  const m = page.memory;
  const ix = page.index || {};
  const covered = m ? `${m.extractions} extraction${m.extractions === 1 ? "" : "s"}; covers ${page.covered_exact ? "" : "≈ "}${num(page.covered_records)} of ${num(page.records)} records (stream seq ${num(m.last_summarized_seq)} of ${num(page.last_seq)})` : "none yet";
  const used = m && m.usage ? `${num(m.usage.input_tokens)} in, ${num(m.usage.output_tokens)} out` + (m.cost_usd != null ? ` ≈ ${usd(m.cost_usd)} at ${m.model} prices` : m.model ? ` (no price for ${m.model})` : "") : "—";
  return el("dl", { class: "facts" },
    el("dt", { text: "Session" }), el("dd", { text: page.session }),
    ix.description ? [el("dt", { text: "Description" }), el("dd", { text: ix.description })] : null,
    page.parent ? [el("dt", { text: "Parent" }), el("dd", { id: "parent" }, relatedLink(page.tenant, page.parent))] : null,
    page.children.length || page.index_partial ? [el("dt", { text: "Children" }), el("dd", {}, relatedList("children", page.tenant, page.children, page.more_children), page.index_partial ? el("span", { class: "muted", text: "reading the session index…" }) : null)] : null,
    page.references.length ? [el("dt", { text: "References" }), el("dd", {}, relatedList("references", page.tenant, page.references, 0))] : null,
    page.referenced_by.length ? [el("dt", { text: "Referenced by" }), el("dd", {}, relatedList("referenced-by", page.tenant, page.referenced_by, page.more_referenced_by))] : null,
    ix.user_id ? [el("dt", { text: "User" }), el("dd", {}, userLink(page.tenant, ix.user_id), " (long-term memory)")] : null,
    ix.model ? [el("dt", { text: "Model" }), el("dd", { text: ix.model })] : null,
    ix.cwd ? [el("dt", { text: "Directory" }), el("dd", { text: ix.cwd })] : null,
    el("dt", { text: "Records" }), el("dd", { id: "records", text: num(page.records) + (page.partial ? " read so far (a long transcript is read over several requests: reading on…)" : "") }),
    el("dt", { text: "Memory" }), el("dd", { id: "memory-revision", text: covered }),
    el("dt", { text: "KV revision" }), el("dd", { id: "kv-revision", title: "the RECALL_MEMORY bucket's revision of the key: a bucket-wide sequence, not a count", text: m ? "r" + m.revision : "—" }),
    el("dt", { text: "LLM tokens" }), el("dd", { id: "usage", text: used }),
    el("dt", { text: "Extraction" }), el("dd", {}, page.extracting ? el("span", { class: "badge running", text: "running" }) : "idle"));
}

async function sessionPage(tenant, session) {
  const base = `/console/api/tenants/${encodeURIComponent(tenant)}/sessions/${encodeURIComponent(session)}`;
  const started = performance.now();
  const page = await api(base);
  const fetched = performance.now();
  const parts = {
    title: el("h1"), summary: el("p"), tags: el("p"), facts: el("div"), chart: el("div", { id: "chart" }),
    memory: el("div", { class: "panel", id: "memory" }), timeline: el("div"), revisions: el("div", { id: "revisions" }),
  };
  const tl = timelineView(), revs = revisionsView();
  parts.timeline.append(tl.node); parts.revisions.append(revs.node);
  const render = (p) => {
    const ix = p.index || {};
    parts.title.textContent = ix.name || session;
    parts.summary.textContent = ix.summary || "";
    parts.tags.replaceChildren(...(ix.tags || []).map(t => el("span", { class: "tag", text: t })));
    parts.facts.replaceChildren(facts(p));
    parts.chart.replaceChildren(chart(p));
    parts.memory.replaceChildren(p.memory ? markdown(p.memory.notes) : el("p", { class: "muted", text: "No memory yet." }));
    tl.update(p.timeline);
    revs.update(p.history);
  };
  render(page);
  setMain(el("p", {}, el("a", { href: "#/", text: "← Sessions" })), parts.title, parts.summary, parts.tags, parts.facts,
    el("h2", { text: "Context over the transcript" }), parts.chart,
    el("div", { class: "grid" },
      el("section", { "aria-labelledby": "memory-h" }, el("h2", { id: "memory-h", text: "Memory" }), parts.memory),
      el("section", { "aria-labelledby": "timeline-h" }, el("h2", { id: "timeline-h", text: "Timeline" }), parts.timeline)),
    el("h2", { text: "Revisions" }), parts.revisions,
    el("h2", { text: "Compaction preview" }), previewSection(base),
    el("h2", { text: "Transcript" }), transcriptView(base));
  const main = document.getElementById("main");
  main.dataset.fetchMs = Math.round(fetched - started);
  main.dataset.loadedMs = Math.round(performance.now() - started);
  main.dataset.renders = 1;
  const refresh = async () => {
    try {
      const p = await api(base);
      if (state.refresh !== refresh) return; // the page was left meanwhile
      render(p);
      main.dataset.renders = +main.dataset.renders + 1;
      if (p.partial || p.index_partial) setTimeout(refresh, 50);
    } catch (err) { /* the next update tries again */ }
  };
  state.refresh = refresh;
  if (page.partial || page.index_partial) setTimeout(refresh, 50); // a long transcript (or index) is read over several requests
}

function previewSection(base) {
  const preview = el("div", { id: "preview" }, el("p", { class: "muted", text: "What a compaction would keep if the agent asked now (no LLM call, nothing is changed)." }));
  const button = el("button", { type: "button", id: "preview-button", text: "Preview compaction" });
  button.addEventListener("click", async () => {
    button.disabled = true;
    try { preview.replaceChildren(previewView(await api(base + "/preview", { method: "POST" }))); }
    catch (err) { preview.replaceChildren(el("p", { class: "error", text: err.message })); }
    finally { button.disabled = false; }
  });
  return el("div", {}, el("div", { class: "toolbar" }, button), preview);
}

const timelineKinds = ["extraction_requested", "extraction_completed", "extraction_failed", "compaction_served"];

// timelineView lists the lifecycle notifications, newest first, filtered
// by kind (the filter survives updates).
function timelineView() {
  const hidden = new Set();
  let items = [];
  const list = el("div");
  const boxes = timelineKinds.concat(["other"]).map(k => {
    const box = el("input", { type: "checkbox", checked: true, "data-kind": k });
    box.addEventListener("change", () => { box.checked ? hidden.delete(k) : hidden.add(k); draw(); });
    return el("label", { class: "filter" }, box, " " + k.replaceAll("_", " "));
  });
  const draw = () => list.replaceChildren(timeline(items.filter(it => !hidden.has(timelineKinds.includes(it.kind) ? it.kind : "other"))));
  return { node: el("div", {}, el("div", { class: "toolbar", id: "timeline-filter", role: "group", "aria-label": "Show kinds" }, boxes), list), update(next) { items = next; draw(); } };
}

function timeline(items) {
  if (!items.length) return el("p", { class: "muted", id: "timeline", text: "No extraction or compaction events to show." });
  const list = el("ol", { class: "timeline", id: "timeline", reversed: true });
  for (const it of items.slice().reverse()) {
    const d = it.data || {};
    let what = it.kind.replaceAll("_", " ");
    let cls = "";
    if (it.kind === "extraction_completed") { what += ` — revision ${d.revision}, covers stream seq ${d.covered_seq}${d.skipped ? " (already covered)" : ""}`; cls = "ok"; }
    else if (it.kind === "extraction_failed") { what += ` — ${d.reason}: ${d.error}${d.parked ? " (parked)" : ""}`; cls = "bad"; }
    else if (it.kind === "extraction_requested") what += ` — up to stream seq ${d.up_to_seq} (${d.reason || "threshold"})`;
    else if (it.kind === "compaction_served") what += ` — ${d.outcome}, ${num(d.tokens_before)} → ${num(d.tokens_after)} tokens, kept ${d.kept_messages}`;
    list.append(el("li", { "data-kind": it.kind }, el("time", { datetime: it.time, text: fmtTime(it.time) }), cls ? el("span", { class: "badge " + cls, text: what }) : what));
  }
  return list;
}

// revisionsView diffs two kept revisions; a choice the user made is kept
// across updates (by revision), else the newest two are shown.
function revisionsView() {
  const node = el("div");
  const chosen = { left: null, right: null };
  let history = [];
  const left = el("select", { id: "rev-left", "aria-label": "Older revision" });
  const right = el("select", { id: "rev-right", "aria-label": "Newer revision" });
  const out = el("div", { class: "panel", id: "diff" });
  const usageBody = el("tbody");
  const usage = el("details", { id: "usage-per-extraction", open: true }, el("summary", { text: "LLM tokens and cost per extraction" }),
    el("table", {}, el("thead", {}, el("tr", {}, ["Extraction", "Time", "Model", "Input", "Output", "Cache read", "Cache write", "Cost"].map((h, i) => el("th", { class: i > 2 ? "num" : null, text: h })))), usageBody));
  const byRev = r => Math.max(0, history.findIndex(h => h.revision === r));
  const render = () => {
    const a = history[+left.value], b = history[+right.value];
    out.replaceChildren(a === b && history.length === 1 ? sideBySide("", a.notes) : sideBySide(a.notes, b.notes));
  };
  left.addEventListener("change", () => { chosen.left = history[+left.value].revision; render(); });
  right.addEventListener("change", () => { chosen.right = history[+right.value].revision; render(); });
  const update = (next) => {
    history = next;
    if (!history.length) { node.replaceChildren(el("p", { class: "muted", text: "No revisions yet." })); return; }
    const li = chosen.left === null ? Math.max(0, history.length - 2) : byRev(chosen.left);
    const ri = chosen.right === null ? history.length - 1 : byRev(chosen.right);
    const opts = sel => history.map((h, i) => el("option", { value: i, selected: i === sel, text: `extraction ${h.extractions} (KV r${h.revision}) — ${fmtTime(h.time)} — covers ${num(h.covered_records)} records` }));
    left.replaceChildren(...opts(li)); right.replaceChildren(...opts(ri));
    left.value = li; right.value = ri;
    usageBody.replaceChildren(...usageRows(history));
    render();
    if (!node.firstChild || !node.contains(out)) node.replaceChildren(el("div", { class: "toolbar" }, el("label", {}, "From ", left), el("label", {}, "to ", right)), out, usage);
  };
  return { node, update };
}

// usageRows: what each kept extraction spent — its LLM tokens and, when
// the model has a price, their cost — from its extraction.completed
// notification, else from the difference of the running totals.
function usageRows(history) {
  return history.map(h => {
    const s = h.spent;
    const label = !s || s.extractions <= 1 ? `extraction ${h.extractions}` : `extractions ${h.extractions - s.extractions + 1}–${h.extractions}`;
    const title = !s ? "its notification is no longer kept, and the revision before it is not either" : s.from === "event" ? "from its extraction.completed notification" : "the difference of the running totals with the kept revision before";
    const cell = k => el("td", { class: "num", text: s ? num(s.usage[k]) : "—" });
    const cost = !s ? "—" : s.cost_usd != null ? usd(s.cost_usd) : "no price";
    return el("tr", { "data-revision": h.revision, title }, el("td", { text: label }), el("td", { text: fmtTime(h.time) }), el("td", { text: s ? s.model || "—" : "—" }),
      cell("input_tokens"), cell("output_tokens"), cell("cache_read_tokens"), cell("cache_creation_tokens"),
      el("td", { class: "num cost", title: s && s.cost_usd == null && s.model ? `no price for ${s.model} (RECALL_INDEX_PRICES)` : null, text: cost }));
  });
}

// usd formats a cost in US dollars.
function usd(x) { return "$" + x.toFixed(x < 1 ? 4 : 2); }

// relatedList lists linked sessions (children, references, or the
// sessions that referenced this one).
function relatedList(id, tenant, list, more) {
  return el("ul", { class: "related", id }, list.map(r => el("li", {}, relatedLink(tenant, r))), more ? el("li", { class: "muted", text: `and ${num(more)} more` }) : null);
}

// relatedLink links another session: its page when known (name and id),
// else the sessions search for the reference as written.
function relatedLink(tenant, r) {
  if (!r.session) return [el("a", { class: "ref", href: "#/?q=" + encodeURIComponent(r.ref), text: "@@" + r.ref }), el("span", { class: "muted", text: " (not resolved by the indexer)" })];
  const link = el("a", { href: `#/t/${encodeURIComponent(tenant)}/s/${encodeURIComponent(r.session)}`, "data-session": r.session, text: r.name || r.session });
  return [link, r.name ? el("span", { class: "muted", text: ` (${r.session})` }) : null,
    r.ref ? el("span", { class: "muted", text: r.ancestor ? ` — ancestor ${r.ancestor} of @@${r.ref}` : ` — @@${r.ref}` }) : null];
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
      r.served ? `${num(r.tokens_before)} → ${num(r.tokens_after)} tokens; ${r.kept_count} messages kept after stream seq ${r.last_summarized_seq || 0}` : (r.reason || "")),
    text ? el("details", {}, el("summary", { text: "Summary message" }), el("pre", { class: "plain", text })) : null,
    r.kept_count ? el("details", {}, el("summary", { text: `Kept messages (${r.kept_count})` }), kept) : null);
}
