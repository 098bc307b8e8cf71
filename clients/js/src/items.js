// The mapping between OpenAI Agents SDK items (Responses-style: messages,
// function_call, function_call_result / function_call_output, reasoning, …)
// and Recall transcript records (Anthropic Messages blocks, docs/api.md).
//
// One item is one record. Recall's content carries what its memory needs to
// read: text, tool calls as tool_use, tool outputs as tool_result answering the
// call's id, so Recall sees every call paired with its output. The item
// itself travels in the CloudEvents extension `agentsitem` as a skeleton:
// the item without the one bulky field that the blocks rebuild exactly
// (content, arguments, output), or the whole item when they cannot. Reading a
// record back gives the item deep-equal to the one added; a record without
// the extension (a skeleton over SKELETON_MAX, or another producer's record)
// is inferred from its blocks.

import { isDeepStrictEqual } from "node:util";

/** The CloudEvents extension holding an item's skeleton. */
export const ITEM_EXT = "agentsitem";
/** The CloudEvents extension of an adapter's control record (`pop:<uuid>`). */
export const OP_EXT = "agentsop";
/** Largest skeleton carried (bytes of JSON); a larger item is inferred when read back. */
export const SKELETON_MAX = 48 * 1024;
const MARK = "$recall";

/** @typedef {Record<string, any>} Item @typedef {{type: string, [k: string]: any}} Block */

/** @param {Item} item @returns {string | undefined} */
export const callIdOf = (item) => item?.callId ?? item?.call_id;

/** A tool call that an output must answer (function_call, computer_call, shell_call, …). @param {Item} item */
export function isCall(item) {
  const t = item?.type;
  return typeof t === "string" && t.endsWith("_call") && t !== "hosted_tool_call" && !!callIdOf(item);
}

/** A tool call's output (function_call_result, function_call_output, shell_call_output, …). @param {Item} item */
export function isOutput(item) {
  const t = item?.type;
  return typeof t === "string" && /_(result|output)$/.test(t) && !!callIdOf(item);
}

/**
 * Items with every tool call answered and every output answering a call
 * before it: an unanswered call, an output whose call is not there (cut off
 * by a summary or a limit) and a second output for one call are left out.
 * @param {Item[]} items @returns {Item[]}
 */
export function pairToolItems(items) {
  /** @type {Map<string, number>} */
  const firstOutput = new Map();
  items.forEach((it, i) => {
    const id = callIdOf(it);
    if (isOutput(it) && id && !firstOutput.has(id)) firstOutput.set(id, i);
  });
  const calls = new Set();
  const answered = new Set();
  return items.filter((it, i) => {
    const id = callIdOf(it);
    if (isCall(it)) {
      const o = firstOutput.get(/** @type {string} */ (id));
      if (o === undefined || o < i || calls.has(id)) return false;
      calls.add(id);
      return true;
    }
    if (isOutput(it)) {
      if (!calls.has(id) || answered.has(id)) return false;
      answered.add(id);
    }
    return true;
  });
}

/** @param {string} s */
const nonEmpty = (s) => (s && s.trim() ? s : "(empty)");

/** @param {any} output the output of a tool call item */
export function outputText(output) {
  if (typeof output === "string") return output;
  if (output && output.type === "text" && typeof output.text === "string") return output.text;
  if (Array.isArray(output) && output.every((p) => p && typeof p.text === "string")) return output.map((p) => p.text).join("\n");
  return JSON.stringify(output ?? null);
}

/** @param {any} content @returns {Block[]} Recall content as a block list */
export function blocksOf(content) {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content : [];
}

/** @param {Block} b the text of a tool_result block */
function resultText(b) {
  const c = b.content;
  if (typeof c === "string") return c;
  return Array.isArray(c) ? c.filter((x) => x?.type === "text").map((x) => x.text).join("\n") : "";
}

/** @param {any} parts @param {(p: any) => string} partText */
function textBlocks(parts, partText) {
  if (typeof parts === "string") return [{ type: "text", text: nonEmpty(parts) }];
  const list = Array.isArray(parts) ? parts : [];
  const blocks = list.map((p) => ({ type: "text", text: nonEmpty(partText(p)) }));
  return blocks.length ? blocks : [{ type: "text", text: "(empty)" }];
}

/** @param {any} p */
const partText = (p) => (typeof p?.text === "string" ? p.text : typeof p?.refusal === "string" ? p.refusal : `[${p?.type ?? "part"}]`);

/**
 * The record of one item: role, Recall blocks, and how its skeleton rebuilds.
 * @param {Item} item
 * @returns {{role: "user" | "assistant", content: Block[], stopReason?: string}}
 */
export function toRecord(item) {
  const type = item.type ?? "message";
  if (type === "message" && (item.role === "user" || item.role === "system" || item.role === "developer")) {
    const blocks = textBlocks(item.content, partText);
    if (item.role !== "user") blocks[0] = { type: "text", text: `[${item.role}] ${blocks[0].text}` };
    return { role: "user", content: blocks };
  }
  if (type === "message") return { role: "assistant", content: textBlocks(item.content, partText), stopReason: "end_turn" };
  if (isCall(item)) {
    let input = item.action ?? item.input;
    if (typeof item.arguments === "string") {
      try {
        input = JSON.parse(item.arguments);
      } catch {
        input = { arguments: item.arguments };
      }
    }
    if (!input || typeof input !== "object" || Array.isArray(input)) input = { value: input ?? null };
    return { role: "assistant", content: [{ type: "tool_use", id: callIdOf(item), name: item.name ?? type, input }], stopReason: "tool_use" };
  }
  if (isOutput(item)) {
    const block = { type: "tool_result", tool_use_id: callIdOf(item), content: nonEmpty(outputText(item.output)) };
    return { role: "user", content: [item.status === "incomplete" ? { ...block, is_error: true } : block] };
  }
  const texts = [...(item.content ?? []), ...(item.summary ?? [])].map(partText).join("\n");
  return { role: "assistant", content: [{ type: "text", text: `[${type}]${texts ? " " + texts : ""}` }] };
}

/** How each kind of removed field is rebuilt from the blocks. @type {Record<string, (b: Block[]) => any>} */
const REBUILD = {
  string: (b) => b.map((x) => x.text).join(""),
  input_text: (b) => b.map((x) => ({ type: "input_text", text: x.text })),
  output_text: (b) => b.map((x) => ({ type: "output_text", text: x.text })),
  arguments: (b) => JSON.stringify(b[0]?.input ?? {}),
  output: (b) => resultText(b[0] ?? { type: "tool_result" }),
};

/** @param {Item} item @returns {[string, string] | null} the bulky field and its rebuild */
function bulk(item) {
  const type = item.type ?? "message";
  if (type === "message") {
    if (typeof item.content === "string") return ["content", "string"];
    return ["content", item.role === "assistant" ? "output_text" : "input_text"];
  }
  if (isCall(item) && typeof item.arguments === "string") return ["arguments", "arguments"];
  if (isOutput(item) && typeof item.output === "string") return ["output", "output"];
  return null;
}

/**
 * The item's skeleton (JSON) for the extension, or undefined when even the
 * smallest one is over SKELETON_MAX.
 * @param {Item} item @param {Block[]} blocks the record's content
 */
export function skeletonOf(item, blocks) {
  const b = bulk(item);
  if (b) {
    const [field, how] = b;
    const { [field]: _, ...rest } = item;
    const skel = { ...rest, [MARK]: `${field}:${how}` };
    if (isDeepStrictEqual(fromRecord(blocks, skel), item)) {
      const s = JSON.stringify(skel);
      return s.length <= SKELETON_MAX ? s : undefined;
    }
  }
  const s = JSON.stringify(item);
  return s.length <= SKELETON_MAX ? s : undefined;
}

/**
 * The item of a record: its skeleton rebuilt with the blocks, or, without a
 * skeleton, inferred from the blocks (`names` maps call ids to tool names, for
 * the outputs).
 * @param {Block[]} blocks @param {Item | string | undefined} skeleton
 * @param {{role?: string, names?: Map<string, string>}} [hint]
 * @returns {Item}
 */
export function fromRecord(blocks, skeleton, hint = {}) {
  if (skeleton !== undefined) {
    const skel = typeof skeleton === "string" ? JSON.parse(skeleton) : { ...skeleton };
    const mark = skel[MARK];
    if (typeof mark !== "string") return skel;
    delete skel[MARK];
    const [field, how] = mark.split(":");
    return { ...skel, [field]: REBUILD[how](blocks) };
  }
  const use = blocks.find((b) => b.type === "tool_use");
  if (use) return { type: "function_call", callId: use.id, name: use.name, arguments: JSON.stringify(use.input ?? {}), status: "completed" };
  const res = blocks.find((b) => b.type === "tool_result");
  if (res) {
    const name = hint.names?.get(res.tool_use_id) ?? "";
    return { type: "function_call_result", callId: res.tool_use_id, name, status: "completed", output: { type: "text", text: resultText(res) } };
  }
  const text = blocks.filter((b) => b.type === "text").map((b) => b.text).join("\n");
  if (hint.role === "assistant") return { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] };
  return { role: "user", content: text };
}
