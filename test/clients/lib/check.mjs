// check.mjs: the assertions of the gateway client checks. Each failure throws
// with what was expected, what came, and where, so CI says what differed.
import { isDeepStrictEqual, inspect } from "node:util";

export class CheckError extends Error {}

// fail throws a CheckError built from its parts.
export function fail(what, details = {}) {
  const lines = [what];
  for (const [k, v] of Object.entries(details)) lines.push(`  ${k}: ${typeof v === "string" ? v : inspect(v, { depth: 6, breakLength: 140 })}`);
  throw new CheckError(lines.join("\n"));
}

export function ok(cond, what, details) {
  if (!cond) fail(what, details);
}

export function equal(got, want, what) {
  if (!isDeepStrictEqual(got, want)) fail(`${what}: differs`, { want, got });
}

const blocksOf = (m) => (typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content);

// anthropicProblem says what makes an Anthropic Messages request's messages
// invalid for the API, or "" when they are valid. It holds the API's rules as
// Claude Code 2.1.332 meets them: roles user, assistant and system (a system
// turn between turns, as the per-turn-control beta allows; it takes no part in
// the alternation), the first conversation turn a user turn, user and assistant
// alternating, every tool_use answered by a tool_result with its id in the very
// next user turn (results first there, in any order), no tool_result without
// its tool_use, no empty text block, no empty content.
export function anthropicProblem(messages) {
  if (!Array.isArray(messages) || messages.length === 0) return "no messages";
  let prevRole = "";
  let pending = null; // tool_use ids the next user turn must answer
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    const where = `messages[${i}] (${m && m.role})`;
    if (!m || !["user", "assistant", "system"].includes(m.role)) return `${where}: role is not user, assistant or system`;
    const bs = blocksOf(m);
    if (!Array.isArray(bs) || bs.length === 0) return `${where}: empty content`;
    for (const [j, b] of bs.entries()) {
      if (!b || typeof b.type !== "string") return `${where}.content[${j}]: a block without a type`;
      if (b.type === "text" && !(typeof b.text === "string" && b.text.trim() !== "")) return `${where}.content[${j}]: empty text block`;
    }
    if (m.role === "system") {
      if (pending) return `${where}: a system turn between tool_use and its tool_result`;
      if (bs.some((b) => b.type !== "text")) return `${where}: a system turn holds a non-text block`;
      continue;
    }
    if (prevRole === "" && m.role !== "user") return `${where}: the first turn is not a user turn`;
    if (prevRole === m.role) return `${where}: two ${m.role} turns in a row`;
    prevRole = m.role;
    if (m.role === "user") {
      const results = [];
      let seenOther = false;
      for (const [j, b] of bs.entries()) {
        if (b.type === "tool_result") {
          if (seenOther) return `${where}.content[${j}]: a tool_result after other blocks`;
          results.push(b.tool_use_id);
        } else seenOther = true;
      }
      const want = pending || new Set();
      for (const id of results) if (!want.has(id)) return `${where}: tool_result ${id} answers no tool_use of the turn before`;
      for (const id of want) if (!results.includes(id)) return `${where}: tool_use ${id} has no tool_result`;
      if (new Set(results).size !== results.length) return `${where}: a tool_use answered twice`;
      pending = null;
      continue;
    }
    if (bs.some((b) => b.type === "tool_result")) return `${where}: a tool_result in an assistant turn`;
    const uses = bs.filter((b) => b.type === "tool_use").map((b) => b.id);
    pending = uses.length ? new Set(uses) : null;
  }
  return "";
}

// chatProblem is anthropicProblem for an OpenAI Chat Completions messages
// array: system/developer first or anywhere, every assistant tool_calls id
// answered by a following role "tool" message before the next assistant or
// user message, no tool message without its call.
export function chatProblem(messages) {
  if (!Array.isArray(messages) || messages.length === 0) return "no messages";
  let pending = new Set();
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    const where = `messages[${i}] (${m && m.role})`;
    if (!m || !["system", "developer", "user", "assistant", "tool"].includes(m.role)) return `${where}: unknown role`;
    if (m.role === "tool") {
      if (!pending.has(m.tool_call_id)) return `${where}: tool message ${m.tool_call_id} answers no open call`;
      pending.delete(m.tool_call_id);
      continue;
    }
    if (pending.size) return `${where}: calls ${[...pending].join(",")} unanswered`;
    if (m.role === "assistant" && Array.isArray(m.tool_calls)) pending = new Set(m.tool_calls.map((c) => c.id));
    const empty = m.content == null || m.content === "" || (Array.isArray(m.content) && m.content.length === 0);
    if (empty && !(m.role === "assistant" && m.tool_calls && m.tool_calls.length)) return `${where}: empty content`;
  }
  return "";
}
