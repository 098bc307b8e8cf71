// Recall console: a session's transcript viewer. Records are read 50 at a
// time; each shows its position in the session, stream seq, estimated
// tokens and blocks (tool uses and their results paired by id). On
// request it marks the blocks a context edit would clear now: the
// compactor's answer to POST …/edit (nothing is changed).
"use strict";

const editToolUses = "clear_tool_uses_20250919", editThinking = "clear_thinking_20251015";

// transcriptView pages through the session's records on demand and keeps
// the marks of the last context-edit answer on every page shown.
function transcriptView(base) {
  const list = el("ol", { class: "transcript", id: "transcript" });
  const more = el("button", { type: "button", class: "secondary", id: "transcript-more", text: "Show the transcript" });
  const marks = new Map(); // "<seq>/<block index>" → the block to clear
  const pending = el("p", { class: "muted", id: "edit-pending" });
  const mark = li => {
    for (const b of li.querySelectorAll(".block[data-block]")) markBlock(b, marks.get(li.dataset.seq + "/" + b.dataset.block));
  };
  const count = () => {
    const shown = list.querySelectorAll(".block.cleared").length;
    pending.textContent = marks.size > shown ? `${num(marks.size - shown)} of the ${num(marks.size)} blocks to clear are in records not shown yet (More).` : "";
  };
  let after = 0, pos = 0;
  const page = async () => {
    const p = await api(`${base}/transcript?after=${after}&limit=50`);
    for (const r of p.records) {
      const li = transcriptEntry(r, ++pos);
      mark(li);
      list.append(li);
    }
    after = p.next_after || 0;
    more.textContent = "More";
    more.hidden = !p.next_after;
    count();
  };
  more.addEventListener("click", async () => {
    more.disabled = true;
    try { await page(); } catch (err) { list.append(el("li", { class: "error", text: err.message })); }
    finally { more.disabled = false; }
  });
  const edits = contextEditView(base, async reply => {
    marks.clear();
    for (const c of reply.clear) marks.set(c.seq + "/" + c.block, c);
    if (!pos) await page(); // the marks are shown on the transcript
    list.querySelectorAll("li[data-seq]").forEach(mark);
    count();
  });
  return el("div", { id: "transcript-view" }, edits, pending, list, more);
}

// markBlock shows on a block whether the context edit clears it (c) or
// not (undefined).
function markBlock(b, c) {
  b.classList.toggle("cleared", !!c);
  const old = b.querySelector(".clear-note");
  if (old) old.remove();
  if (!c) { delete b.dataset.cleared; return; }
  b.dataset.cleared = c.kind;
  const what = c.action === "remove" ? "would be removed" : c.kind === "tool_input" ? "its input would become {}" : "would be replaced by a placeholder";
  b.querySelector(".tag").after(el("span", { class: "badge bad clear-note", title: c.placeholder || null, text: `${c.kind.replaceAll("_", " ")} ${what} (≈${num(c.tokens)} tokens)` }));
}

// contextEditView asks which blocks a context edit would clear: at the
// tenant's settings when the fields are empty, else with the strategies
// the fields give (they replace the tenant's).
function contextEditView(base, onReply) {
  const trigger = el("input", { type: "number", min: 0, id: "edit-trigger", placeholder: "tenant's setting", "aria-label": "Trigger (input tokens)" });
  const keep = el("input", { type: "number", min: 0, id: "edit-keep", placeholder: "3", "aria-label": "Tool uses kept" });
  const thinking = el("input", { type: "checkbox", id: "edit-thinking" });
  const button = el("button", { type: "button", class: "secondary", id: "edit-button", text: "Mark what a context edit would clear" });
  const out = el("div", { id: "edit-result", role: "status" });
  button.addEventListener("click", async () => {
    button.disabled = true;
    const custom = trigger.value !== "" || keep.value !== "" || thinking.checked;
    try {
      const reply = await api(base + "/edit", { method: "POST", headers: { "Content-Type": "application/json" }, body: custom ? JSON.stringify(editRequest(trigger.value, keep.value, thinking.checked)) : "" });
      out.replaceChildren(editSummary(reply, custom));
      await onReply(reply);
    } catch (err) { out.replaceChildren(el("p", { class: "error", text: err.message })); }
    finally { button.disabled = false; }
  });
  return el("div", { class: "panel edits" },
    el("div", { class: "toolbar" }, button,
      el("label", {}, "trigger ", trigger, " input tokens"), el("label", {}, "keep ", keep, " tool uses"),
      el("label", {}, thinking, " clear thinking (keep the last turn's)")),
    el("p", { class: "muted", text: "Which old tool results and thinking blocks a context edit would clear from the context now (docs/compaction.md, \"Context editing\"). Empty fields: the tenant's settings, else clear_tool_uses past 100,000 input tokens keeping 3. Nothing is changed." }),
    out);
}

// editRequest is the context_management of the fields.
function editRequest(trigger, keep, thinking) {
  const edits = [];
  if (thinking) edits.push({ type: editThinking, keep: { type: "thinking_turns", value: 1 } });
  const tools = { type: editToolUses };
  if (trigger !== "") tools.trigger = { type: "input_tokens", value: +trigger };
  if (keep !== "") tools.keep = { type: "tool_uses", value: +keep };
  edits.push(tools);
  return { context_management: { edits } };
}

function editSummary(r, custom) {
  const where = custom ? "with these settings" : "at the tenant's settings";
  const range = r.first_seq ? ` (the context from stream seq ${num(r.first_seq)} to ${num(r.last_seq)})` : "";
  if (!r.clear.length) return el("p", {}, el("span", { class: "badge ok", text: "nothing to clear" }), ` A context edit ${where} would clear nothing: ≈${num(r.tokens_before)} tokens${range} are below its trigger, or every tool result is among the kept.`);
  const kinds = {};
  for (const c of r.clear) kinds[c.kind] = (kinds[c.kind] || 0) + 1;
  const what = Object.entries(kinds).map(([k, n]) => `${num(n)} ${k.replaceAll("_", " ")}${n === 1 ? "" : "s"}`).join(", ");
  const applied = (r.applied_edits || []).map(a => a.type).join(", ");
  return el("p", {}, el("span", { class: "badge bad", text: `${num(r.clear.length)} block${r.clear.length === 1 ? "" : "s"} to clear` }),
    ` A context edit ${where} (${applied}) would clear ${what}, ≈${num(r.tokens_before)} → ≈${num(r.tokens_after)} tokens${range}. They are marked in the transcript below.`);
}

function transcriptEntry(r, pos) {
  const head = el("div", { class: "muted" }, `#${num(pos)} · stream seq ${num(r.seq)} · ${fmtTime(r.time)}`,
    r.tokens ? ` · ≈${num(r.tokens)} tokens` : "", r.model ? ` · ${r.model}` : "");
  const blocks = (r.blocks || []).map((b, i) => {
    let label = b.type;
    if (b.type === "tool_use") label = `tool_use ${b.name} (${b.id})`;
    if (b.type === "tool_result") label = `tool_result for ${b.tool_use_id}${b.is_error ? " — error" : ""}`;
    return el("div", { class: "block " + b.type, "data-block": i, "data-tool": b.id || b.tool_use_id || null },
      el("span", { class: "tag", text: label }), el("pre", { class: "plain" }, withReferences(b.text || ""), b.cut ? `\n… ${num(b.cut)} more characters` : ""));
  });
  return el("li", { "data-seq": r.seq, "data-kind": r.kind }, head, el("strong", { text: r.role || r.kind }), r.note ? " " + r.note : "", blocks);
}

// withReferences makes each @@reference to another session (by name or
// id) a link to the sessions search for it; a full stop after it ends the
// sentence, as for the indexer (memory.FindRefs).
function withReferences(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(/@@([A-Za-z0-9][A-Za-z0-9._-]*)/g)) {
    const ref = m[1].replace(/\.+$/, "");
    out.push(text.slice(last, m.index), el("a", { class: "ref", href: "#/?q=" + encodeURIComponent(ref), text: "@@" + ref }));
    last = m.index + 2 + ref.length;
  }
  out.push(text.slice(last));
  return out;
}
