// sdk-anthropic.mjs: the official Anthropic SDK (npm @anthropic-ai/sdk)
// against the Recall gateway (GATEWAY_URL/anthropic) and the scripted
// upstream behind it: messages streaming and not, a tool loop stored once in
// Recall, count_tokens passed through, compaction blocks (compact_20260112
// with and without pause, on-demand `compaction`) round-tripped so the upstream
// only ever gets plain valid content, and scripted 529/429 errors passed to the
// SDK verbatim. Env: GATEWAY_URL, UPSTREAM_URL, RECALL_URL.
import Anthropic from "@anthropic-ai/sdk";
import { randomUUID } from "node:crypto";
import { anthropicProblem, equal, fail, ok } from "./lib/check.mjs";
import { scriptedError } from "./lib/faults.mjs";
import { blocksOf, exportSession, need, poll, recallHeaders, token, upstreamRequests } from "./lib/env.mjs";
import { runChecks } from "./lib/run.mjs";

const gateway = need("GATEWAY_URL");
const upstream = need("UPSTREAM_URL");
const recall = need("RECALL_URL");
const KEY = "sk-ant-sdk-test-key";
const MODEL = "claude-test-model";

const client = (session, opts = {}) => new Anthropic({
  baseURL: `${gateway}/anthropic`, apiKey: KEY, maxRetries: 0, timeout: 30_000,
  defaultHeaders: { "x-recall-session": session, ...(opts.noToken ? {} : recallHeaders()) },
});

// sentSince is the upstream's requests after the first n, of api (the checks
// run one after the other, nothing else calls the upstream meanwhile).
async function sentSince(n, api = "anthropic.messages") {
  return (await upstreamRequests(upstream)).filter((q) => q.n > n && q.api === api);
}
const upstreamCount = async () => (await upstreamRequests(upstream)).length;

function checkValid(reqs, what) {
  ok(reqs.length > 0, `${what}: the upstream received nothing`);
  for (const q of reqs) {
    const p = anthropicProblem(q.json && q.json.messages);
    if (p) fail(`${what}: upstream request #${q.n} is not valid for the Messages API`, { problem: p });
    ok(q.h("x-api-key") === KEY || q.h("authorization") === `Bearer ${KEY}`, `${what}: upstream request #${q.n} did not carry the client's key untouched`, { x_api_key: q.h("x-api-key"), authorization: q.h("authorization") });
    ok(!JSON.stringify(q.json).includes('"type":"compaction"'), `${what}: upstream request #${q.n} holds a compaction block (one the upstream did not sign)`);
  }
}

// history is a conversation of n tool calls whose results are each ~40 KB
// (10k tokens at 4 characters a token), ending with a user turn.
function history(tag, n) {
  const msgs = [{ role: "user", content: `Audit the ${tag} ledgers.` }];
  for (let i = 1; i <= n; i++) {
    const id = `toolu_${tag}_${i}`;
    msgs.push({ role: "assistant", content: [{ type: "text", text: `Reading ledger ${i}.` }, { type: "tool_use", id, name: "Bash", input: { command: `cat ledger${i}.txt` } }] });
    msgs.push({ role: "user", content: [{ type: "tool_result", tool_use_id: id, content: `ledger ${i} (${tag}): ` + `entry ${i} balanced; `.repeat(2200) }] });
  }
  msgs.push({ role: "user", content: "Go on with the audit." });
  // The last two are user turns: merge them as the API wants one turn.
  const last = msgs.pop();
  msgs[msgs.length - 1].content.push({ type: "text", text: last.content });
  return msgs;
}

let loop = null; // the tool loop's session and tool call ids, for the storage check

const checks = {
  async "messages, not streaming"() {
    const s = `sdk-a-plain-${randomUUID()}`;
    const n = await upstreamCount();
    const msg = await client(s).messages.create({ model: MODEL, max_tokens: 256, messages: [{ role: "user", content: "Say hello." }] });
    ok(msg.type === "message" && msg.role === "assistant" && msg.content.length > 0, "the answer is not a message", { msg });
    ok(msg.usage && msg.usage.input_tokens > 0, "the answer carries no usage", { usage: msg.usage });
    checkValid(await sentSince(n), "messages");
    return `stop_reason ${msg.stop_reason}`;
  },

  async "messages, streaming"() {
    const s = `sdk-a-stream-${randomUUID()}`;
    const n = await upstreamCount();
    const stream = client(s).messages.stream({ model: MODEL, max_tokens: 256, messages: [{ role: "user", content: "Say hello." }] });
    const kinds = [];
    stream.on("streamEvent", (e) => kinds.push(e.type));
    const msg = await stream.finalMessage();
    ok(kinds[0] === "message_start" && kinds.includes("content_block_delta") && kinds.at(-1) === "message_stop", "the stream's events are not a Messages stream", { kinds });
    ok(msg.content.length > 0 && msg.stop_reason, "the streamed message is empty", { msg });
    checkValid(await sentSince(n), "streaming");
    return `${kinds.length} events`;
  },

  async "tool loop, streaming and not"() {
    const s = `sdk-a-loop-${randomUUID()}`;
    const n = await upstreamCount();
    const c = client(s);
    const messages = [{ role: "user", content: "Run the scripted tools." }];
    const ids = [];
    for (let i = 0; i < 4; i++) {
      const stream = i % 2 === 1;
      const msg = stream ? await c.messages.stream({ model: MODEL, max_tokens: 256, messages }).finalMessage()
        : await c.messages.create({ model: MODEL, max_tokens: 256, messages });
      messages.push({ role: "assistant", content: msg.content });
      const uses = msg.content.filter((b) => b.type === "tool_use");
      if (msg.stop_reason !== "tool_use") break;
      ok(uses.length > 0, "stop_reason tool_use without a tool_use block", { content: msg.content });
      ids.push(...uses.map((u) => u.id));
      messages.push({ role: "user", content: uses.map((u) => ({ type: "tool_result", tool_use_id: u.id, content: `output of ${u.id}` })) });
    }
    ok(ids.length >= 2, "the scripted upstream gave fewer than 2 tool calls", { ids });
    if (messages.at(-1).role === "user") await c.messages.create({ model: MODEL, max_tokens: 256, messages });
    checkValid(await sentSince(n), "tool loop");
    loop = { s, ids };
    return `${ids.length} tool calls`;
  },

  async "stored once: the tool loop's calls and results in Recall's transcript"() {
    ok(loop, "the tool loop check did not run or failed");
    const { s, ids } = loop;
    const stored = await poll(`Recall to store the tool loop of ${s}`, 20_000, async () => {
      const recs = await exportSession(recall, s);
      if (!recs) return undefined;
      const results = recs.flatMap((r) => blocksOf(r.message || {})).filter((b) => b.type === "tool_result").map((b) => b.tool_use_id);
      return ids.every((id) => results.includes(id)) ? { recs, results } : undefined;
    });
    for (const id of ids) ok(stored.results.filter((x) => x === id).length === 1, `Recall stored the result of ${id} ${stored.results.filter((x) => x === id).length} times, want once`);
    ok(!JSON.stringify(stored.recs).includes(KEY), "the client's API key is in Recall's transcript");
    return `${ids.length} tool calls, each result stored once`;
  },

  async "count_tokens passed through"() {
    const s = `sdk-a-count-${randomUUID()}`;
    const n = await upstreamCount();
    const r = await client(s).messages.countTokens({ model: MODEL, messages: [{ role: "user", content: "count me" }] });
    ok(Number.isInteger(r.input_tokens) && r.input_tokens > 0, "count_tokens answered no count", { r });
    ok((await sentSince(n, "anthropic.count_tokens")).length === 1, "count_tokens did not reach the upstream once");
  },

  async "compact_20260112 with pause: a compaction block, no model call, round-tripped"() {
    return thresholdCompaction(true);
  },

  async "compact_20260112 without pause, streaming: block then the answer"() {
    return thresholdCompaction(false);
  },

  async "on-demand compaction field: one block, stop_reason compaction, round-tripped"() {
    const s = `sdk-a-ondemand-${randomUUID()}`;
    const c = client(s);
    const msgs = history("ondemand", 3);
    const n = await upstreamCount();
    const resp = await c.beta.messages.create({ betas: ["compact-2026-09-04"], model: MODEL, max_tokens: 1024, compaction: { type: "summarize" }, messages: msgs });
    ok(resp.stop_reason === "compaction" && resp.content.length === 1 && resp.content[0].type === "compaction", "the answer is not one compaction block", { stop_reason: resp.stop_reason, content: resp.content });
    ok(typeof resp.content[0].content === "string" && resp.content[0].content.trim() !== "", "the compaction block has no summary", { block: resp.content[0] });
    ok((await sentSince(n)).length === 0, "the on-demand compaction called the upstream (it must be answered from Recall's memory)");
    const next = [{ role: "assistant", content: resp.content }, { role: "user", content: "Continue from the summary." }];
    await c.beta.messages.create({ betas: ["compact-2026-09-04"], model: MODEL, max_tokens: 256, messages: next });
    const after = await sentSince(n);
    checkValid(after, "after on-demand compaction");
    ok(!after.at(-1).raw.includes("toolu_ondemand_1"), "the upstream got messages the compaction block replaced");
  },

  async "tenant refusal: no or a wrong Recall token, refused in the API's shape, not forwarded"() {
    if (!token) return "open mode (no RECALL_TOKEN): nothing to refuse";
    for (const [how, c] of [["no token", client(`sdk-a-refused-${randomUUID()}`, { noToken: true })],
      ["a wrong token", new Anthropic({ baseURL: `${gateway}/anthropic`, apiKey: KEY, maxRetries: 0, defaultHeaders: { "x-recall-token": "not-a-token" } })]]) {
      const n = await upstreamCount();
      let err = null;
      try { await c.messages.create({ model: MODEL, max_tokens: 64, messages: [{ role: "user", content: "hi" }] }); } catch (e) { err = e; }
      ok(err instanceof Anthropic.APIError && (err.status === 401 || err.status === 403), `${how}: not refused with 401/403`, { err: String(err) });
      ok(err.error && err.error.type === "error" && err.error.error && typeof err.error.error.type === "string", `${how}: the refusal is not in the Anthropic error shape`, { body: err.error });
      ok((await sentSince(n)).length === 0 && (await sentSince(n, "anthropic.count_tokens")).length === 0, `${how}: the refused request reached the upstream`);
    }
  },

  async "scripted 529 passed verbatim (not streaming and streaming)"() {
    return scriptedErrors(529);
  },

  async "scripted 429 passed verbatim (not streaming and streaming)"() {
    return scriptedErrors(429);
  },
};

// thresholdCompaction sends a history over the trigger with compact_20260112;
// with pause the answer is the compaction block alone and the upstream is not
// called; without pause (streamed) the block comes first, then the upstream's
// answer to summary + kept window. Then the next request appends the answer
// as usual: the upstream gets plain valid content, nothing from before the block.
async function thresholdCompaction(pause) {
  const tag = pause ? "pause" : "nopause";
  const s = `sdk-a-${tag}-${randomUUID()}`;
  const c = client(s);
  const cm = { edits: [{ type: "compact_20260112", trigger: { type: "input_tokens", value: 50000 }, pause_after_compaction: pause }] };
  const msgs = history(tag, 6);
  const n = await upstreamCount();
  const params = { betas: ["compact-2026-01-12"], model: MODEL, max_tokens: 1024, context_management: cm, messages: msgs };
  const resp = pause ? await c.beta.messages.create(params) : await c.beta.messages.stream(params).finalMessage();
  ok(resp.content.length > 0 && resp.content[0].type === "compaction", "the answer does not start with a compaction block", { content: resp.content.map((b) => b.type), stop_reason: resp.stop_reason });
  ok(typeof resp.content[0].content === "string" && resp.content[0].content.trim() !== "", "the compaction block has no summary", { block: resp.content[0] });
  const during = await sentSince(n);
  if (pause) {
    ok(resp.stop_reason === "compaction" && resp.content.length === 1, "with pause_after_compaction the answer must stop after the block", { stop_reason: resp.stop_reason, content: resp.content.map((b) => b.type) });
    ok(during.length === 0, "the paused compaction called the upstream", { requests: during.length });
  } else {
    ok(resp.content.length > 1, "without pause the answer must go on after the block", { content: resp.content.map((b) => b.type) });
    checkValid(during, "compaction without pause");
    ok(!during.some((q) => q.raw.includes(`toolu_${tag}_1"`)), "the upstream got the compacted messages (first tool call) with the summary");
  }
  const next = [...msgs, { role: "assistant", content: resp.content }, { role: "user", content: "Continue." }];
  await c.beta.messages.create({ ...params, messages: next });
  const after = await sentSince(n);
  checkValid(after, "after compaction");
  ok(!after.at(-1).raw.includes(`toolu_${tag}_1"`), "the request after the compaction block still sent what came before it");
  return `${resp.content.length} blocks`;
}

// scriptedErrors checks that an upstream error reaches the SDK verbatim: the
// status, the error body, the request id and retry headers.
async function scriptedErrors(status) {
  const want = scriptedError("/v1/messages", status);
  const c = client(`sdk-a-err-${status}-${randomUUID()}`);
  for (const streamed of [false, true]) {
    const p = { model: `scripted-error-${status}`, max_tokens: 64, messages: [{ role: "user", content: "hi" }] };
    let err = null;
    try {
      if (streamed) await c.messages.stream(p).finalMessage();
      else await c.messages.create(p);
    } catch (e) {
      err = e;
    }
    const how = streamed ? "streaming" : "not streaming";
    ok(err instanceof Anthropic.APIError, `${how}: no APIError for a scripted ${status}`, { err: String(err) });
    equal(err.status, status, `${how}: status`);
    equal(err.error, JSON.parse(want.body), `${how}: the error body`);
    for (const h of ["request-id", "retry-after", "x-should-retry", "anthropic-ratelimit-requests-remaining"]) equal(err.headers.get(h), want.headers[h], `${how}: header ${h}`);
  }
}

await runChecks("anthropic-sdk", checks);
