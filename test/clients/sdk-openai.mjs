// sdk-openai.mjs: the official OpenAI SDK (npm openai) against the Recall
// gateway (GATEWAY_URL/openai/v1) and the scripted upstream behind it: Chat
// Completions and Responses, streaming and not, tool loops stored once in
// Recall, Responses compaction (POST /v1/responses/compact and
// context_management compaction) round-tripped so the upstream gets plain
// valid input and no compaction item, scripted 429/529 errors passed to the
// SDK verbatim. Env: GATEWAY_URL, UPSTREAM_URL, RECALL_URL.
import OpenAI from "openai";
import { randomUUID } from "node:crypto";
import { chatProblem, equal, fail, ok } from "./lib/check.mjs";
import { scriptedError } from "./lib/faults.mjs";
import { exportSession, need, poll, recallHeaders, token, upstreamRequests } from "./lib/env.mjs";
import { runChecks } from "./lib/run.mjs";

const gateway = need("GATEWAY_URL");
const upstream = need("UPSTREAM_URL");
const recall = need("RECALL_URL");
const KEY = "sk-openai-sdk-test-key";
const MODEL = "gpt-test-model";
const TOOLS_CHAT = [{ type: "function", function: { name: "Bash", description: "run a command", parameters: { type: "object", properties: { command: { type: "string" } } } } }];
const TOOLS_RESP = [{ type: "function", name: "Bash", description: "run a command", parameters: { type: "object", properties: { command: { type: "string" } } } }];

const client = (session, headers = recallHeaders()) => new OpenAI({ baseURL: `${gateway}/openai/v1`, apiKey: KEY, maxRetries: 0, timeout: 30_000, defaultHeaders: { "x-recall-session": session, ...headers } });
const upstreamCount = async () => (await upstreamRequests(upstream)).length;
const sentSince = async (n, api) => (await upstreamRequests(upstream)).filter((q) => q.n > n && (!api || q.api === api));

// responsesProblem says what makes a Responses input invalid: a
// function_call_output without its function_call before it, a function_call
// never answered, a compaction item (one the upstream did not make).
function responsesProblem(input) {
  if (typeof input === "string") return input.trim() ? "" : "empty input";
  if (!Array.isArray(input) || input.length === 0) return "no input";
  const open = new Set();
  for (const [i, it] of input.entries()) {
    if (it.type === "compaction") return `input[${i}]: a compaction item`;
    if (it.type === "function_call") open.add(it.call_id);
    if (it.type === "function_call_output") {
      if (!open.has(it.call_id)) return `input[${i}]: output ${it.call_id} without its call`;
      open.delete(it.call_id);
    }
  }
  return open.size ? `calls ${[...open].join(",")} unanswered` : "";
}

function checkSent(reqs, what) {
  ok(reqs.length > 0, `${what}: the upstream received nothing`);
  for (const q of reqs) {
    ok(q.h("authorization") === `Bearer ${KEY}`, `${what}: upstream request #${q.n} did not carry the client's key untouched`, { got: q.h("authorization") });
    const b = q.json || {};
    const p = q.api === "openai.chat" ? chatProblem(b.messages) : responsesProblem(b.input);
    if (p) fail(`${what}: upstream request #${q.n} (${q.api}) is not valid`, { problem: p });
  }
}

// bigInput is a Responses history of n function calls with ~40 KB outputs.
function bigInput(tag, n) {
  const input = [{ role: "user", content: `Audit the ${tag} ledgers.` }];
  for (let i = 1; i <= n; i++) {
    const id = `call_${tag}_${i}`;
    input.push({ type: "function_call", call_id: id, name: "Bash", arguments: JSON.stringify({ command: `cat ledger${i}.txt` }) });
    input.push({ type: "function_call_output", call_id: id, output: `ledger ${i} (${tag}): ` + `entry ${i} balanced; `.repeat(2200) });
  }
  input.push({ role: "user", content: "Go on with the audit." });
  return input;
}

async function storedOnce(session, ids) {
  const recs = await poll(`Recall to store the tool loop of ${session}`, 20_000, async () => {
    const r = await exportSession(recall, session);
    if (!r) return undefined;
    const text = JSON.stringify(r);
    return ids.every((id) => text.includes(id)) ? r : undefined;
  });
  const results = recs.flatMap((r) => (Array.isArray(r.message && r.message.content) ? r.message.content : [])).filter((b) => b.type === "tool_result").map((b) => b.tool_use_id);
  for (const id of ids) ok(results.filter((x) => x === id).length === 1, `Recall stored the result of ${id} ${results.filter((x) => x === id).length} times, want once`, { results });
  ok(!JSON.stringify(recs).includes(KEY), "the client's API key is in Recall's transcript");
}

const loops = {}; // each tool loop's session and call ids, for the storage checks

const checks = {
  async "chat completions tool loop, streaming and not"() {
    const s = `sdk-o-chat-${randomUUID()}`;
    const n = await upstreamCount();
    const c = client(s);
    const messages = [{ role: "system", content: "You run tools." }, { role: "user", content: "Run the scripted tools." }];
    const ids = [];
    for (let i = 0; i < 4; i++) {
      const msg = i % 2 ? await streamChat(c, messages) : (await c.chat.completions.create({ model: MODEL, messages, tools: TOOLS_CHAT })).choices[0].message;
      messages.push({ role: "assistant", content: msg.content ?? null, ...(msg.tool_calls && msg.tool_calls.length ? { tool_calls: msg.tool_calls } : {}) });
      if (!msg.tool_calls || msg.tool_calls.length === 0) break;
      for (const tc of msg.tool_calls) { ids.push(tc.id); messages.push({ role: "tool", tool_call_id: tc.id, content: `output of ${tc.id}` }); }
    }
    ok(ids.length >= 2, "the scripted upstream gave fewer than 2 tool calls", { ids });
    if (messages.at(-1).role === "tool") await c.chat.completions.create({ model: MODEL, messages, tools: TOOLS_CHAT });
    checkSent(await sentSince(n), "chat");
    loops.chat = { s, ids };
    return `${ids.length} tool calls`;
  },

  async "stored once: the chat tool loop in Recall's transcript"() {
    ok(loops.chat, "the chat tool loop check did not run or failed");
    await storedOnce(loops.chat.s, loops.chat.ids);
  },

  async "responses tool loop, streaming and not"() {
    const s = `sdk-o-resp-${randomUUID()}`;
    const n = await upstreamCount();
    const c = client(s);
    const input = [{ role: "user", content: "Run the scripted tools." }];
    const ids = [];
    for (let i = 0; i < 4; i++) {
      const resp = i % 2 ? await c.responses.stream({ model: MODEL, input, tools: TOOLS_RESP }).finalResponse() : await c.responses.create({ model: MODEL, input, tools: TOOLS_RESP });
      ok(resp.object === "response" && Array.isArray(resp.output), "the answer is not a response", { resp });
      const calls = resp.output.filter((it) => it.type === "function_call");
      input.push(...resp.output);
      if (calls.length === 0) break;
      for (const fc of calls) { ids.push(fc.call_id); input.push({ type: "function_call_output", call_id: fc.call_id, output: `output of ${fc.call_id}` }); }
    }
    ok(ids.length >= 2, "the scripted upstream gave fewer than 2 function calls", { ids });
    // The last output reaches the gateway (and so Recall) only with a request.
    if (input.at(-1).type === "function_call_output") await c.responses.create({ model: MODEL, input, tools: TOOLS_RESP });
    checkSent(await sentSince(n), "responses");
    loops.responses = { s, ids };
    return `${ids.length} function calls`;
  },

  async "stored once: the responses tool loop in Recall's transcript"() {
    ok(loops.responses, "the responses tool loop check did not run or failed");
    await storedOnce(loops.responses.s, loops.responses.ids);
  },

  async "responses/compact: one compaction item, no model call, round-tripped"() {
    const s = `sdk-o-compact-${randomUUID()}`;
    const c = client(s);
    const n = await upstreamCount();
    const out = await c.responses.compact({ model: MODEL, input: bigInput("compact", 6) });
    ok(out.object === "response.compaction", "the answer is not a response.compaction", { object: out.object });
    const items = out.output.filter((it) => it.type === "compaction");
    ok(items.length === 1 && typeof items[0].encrypted_content === "string" && items[0].encrypted_content !== "", "the output holds no single compaction item with content", { output: out.output.map((it) => it.type) });
    ok((await sentSince(n)).length === 0, "responses/compact called the upstream (it must be answered from Recall's memory)");
    await c.responses.create({ model: MODEL, input: [...out.output, { role: "user", content: "Continue." }] });
    const after = await sentSince(n);
    checkSent(after, "after compact");
    ok(!after.at(-1).raw.includes("call_compact_1"), "the upstream got items the compaction item replaced");
  },

  async "responses context_management compaction: an item in the output, round-tripped"() {
    const s = `sdk-o-cm-${randomUUID()}`;
    const c = client(s);
    const n = await upstreamCount();
    const input = bigInput("cm", 6);
    const cm = [{ type: "compaction", compact_threshold: 50000 }];
    const resp = await c.responses.create({ model: MODEL, input, context_management: cm });
    const items = resp.output.filter((it) => it.type === "compaction");
    ok(items.length === 1, "the response holds no compaction item", { output: resp.output.map((it) => it.type) });
    const during = await sentSince(n);
    checkSent(during, "compaction response");
    ok(!during.some((q) => q.raw.includes('"call_cm_1"')), "the upstream got the compacted items with the summary");
    // The answer's calls are answered, as a client running its tools does (the API refuses a call left open).
    const outputs = resp.output.filter((it) => it.type === "function_call").map((it) => ({ type: "function_call_output", call_id: it.call_id, output: "done" }));
    await c.responses.create({ model: MODEL, input: [...input, ...resp.output, ...outputs, { role: "user", content: "Continue." }], context_management: cm });
    const after = await sentSince(n);
    checkSent(after, "after compaction");
    ok(!after.at(-1).raw.includes('"call_cm_1"'), "the request after the compaction item still sent what came before it");
  },

  async "tenant refusal: no or a wrong Recall token, refused in the API's shape, not forwarded"() {
    if (!token) return "open mode (no RECALL_TOKEN): nothing to refuse";
    for (const [how, headers] of [["no token", {}], ["a wrong token", { "x-recall-token": "not-a-token" }]]) {
      const n = await upstreamCount();
      let err = null;
      try { await client(`sdk-o-refused-${randomUUID()}`, headers).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }); } catch (e) { err = e; }
      ok(err instanceof OpenAI.APIError && (err.status === 401 || err.status === 403), `${how}: not refused with 401/403`, { err: String(err) });
      ok(err.error && typeof err.error.message === "string", `${how}: the refusal is not in the OpenAI error shape`, { error: err.error });
      ok((await sentSince(n)).length === 0, `${how}: the refused request reached the upstream`);
    }
  },

  async "scripted 429 passed verbatim"() { return scriptedErrors(429); },
  async "scripted 529 passed verbatim"() { return scriptedErrors(529); },
};

async function streamChat(c, messages) {
  const stream = await c.chat.completions.create({ model: MODEL, messages, tools: TOOLS_CHAT, stream: true });
  let content = "", chunks = 0;
  const calls = [];
  for await (const ch of stream) {
    chunks++;
    const d = ch.choices[0] && ch.choices[0].delta;
    if (!d) continue;
    if (d.content) content += d.content;
    for (const tc of d.tool_calls || []) {
      const cur = (calls[tc.index] ||= { id: tc.id, type: "function", function: { name: "", arguments: "" } });
      if (tc.id) cur.id = tc.id;
      if (tc.function && tc.function.name) cur.function.name += tc.function.name;
      if (tc.function && tc.function.arguments) cur.function.arguments += tc.function.arguments;
    }
  }
  ok(chunks > 0, "the chat stream had no chunks");
  return { content: content || null, tool_calls: calls.filter(Boolean) };
}

async function scriptedErrors(status) {
  const want = scriptedError("/v1/chat/completions", status);
  const c = client(`sdk-o-err-${status}-${randomUUID()}`);
  const tries = {
    "chat": () => c.chat.completions.create({ model: `scripted-error-${status}`, messages: [{ role: "user", content: "hi" }] }),
    "chat streaming": async () => { for await (const _ of await c.chat.completions.create({ model: `scripted-error-${status}`, messages: [{ role: "user", content: "hi" }], stream: true })); },
    "responses": () => c.responses.create({ model: `scripted-error-${status}`, input: "hi" }),
  };
  for (const [how, fn] of Object.entries(tries)) {
    let err = null;
    try { await fn(); } catch (e) { err = e; }
    ok(err instanceof OpenAI.APIError, `${how}: no APIError for a scripted ${status}`, { err: String(err) });
    equal(err.status, status, `${how}: status`);
    equal(err.error, JSON.parse(want.body).error, `${how}: the error body`);
    for (const h of ["x-request-id", "retry-after", "x-should-retry", "x-ratelimit-remaining-requests"]) equal(err.headers.get(h), want.headers[h], `${how}: header ${h}`);
  }
}

await runChecks("openai-sdk", checks);
