// The AI SDK middleware and prepareStep with the real `ai` package and its
// MockLanguageModelV4 (the SDK's own model interface) against recall up: a
// 40-turn tool loop whose prompt Recall compacts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateText, jsonSchema, stepCountIs, streamText, tool, wrapLanguageModel } from "ai";
import { MockLanguageModelV4, simulateReadableStream } from "ai/test";
import { recallMiddleware, recallPrepareStep } from "../src/ai.js";
import { client, live, RECALL_HTTP, sessionName, toolOutput } from "./live.js";

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };

/** Checks a prompt as a model API would: results answer the calls of the assistant message before them. */
function checkPrompt(prompt) {
  let calls = new Set();
  for (const m of prompt) {
    if (m.role === "assistant") calls = new Set(m.content.filter((p) => p.type === "tool-call").map((p) => p.toolCallId));
    if (m.role === "tool") for (const p of m.content) assert.ok(calls.has(p.toolCallId), `tool result ${p.toolCallId} answers no call before it`);
  }
}

/** The script: a user turn "turn N: …" gets a lookup call, its result gets "turn N done: value-N". */
function answer(prompt) {
  checkPrompt(prompt);
  const last = prompt.at(-1);
  if (last.role === "tool") {
    const n = /value-(\d+)/.exec(last.content[0].output.value)[1];
    return [{ type: "text", text: `turn ${n} done: value-${n}` }];
  }
  const n = /turn (\d+):/.exec(last.content.map((p) => p.text).join(""))[1];
  return [{ type: "tool-call", toolCallId: `call_${n}`, toolName: "lookup", input: JSON.stringify({ turn: Number(n) }) }];
}

function scripted(prompts) {
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      prompts.push(prompt);
      const content = answer(prompt);
      return { content, finishReason: { unified: content[0].type === "tool-call" ? "tool-calls" : "stop", raw: undefined }, usage, warnings: [] };
    },
    doStream: async ({ prompt }) => {
      prompts.push(prompt);
      const content = answer(prompt);
      const parts = content[0].type === "text"
        ? [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: content[0].text.slice(0, 7) }, { type: "text-delta", id: "t", delta: content[0].text.slice(7) }, { type: "text-end", id: "t" }]
        : [content[0]];
      const finish = { type: "finish", finishReason: { unified: content[0].type === "tool-call" ? "tool-calls" : "stop", raw: undefined }, usage };
      return { stream: simulateReadableStream({ chunks: [{ type: "stream-start", warnings: [] }, ...parts, finish] }) };
    },
  });
}

const lookup = tool({
  description: "Looks up the value of a turn",
  inputSchema: jsonSchema({ type: "object", properties: { turn: { type: "number" } }, required: ["turn"] }),
  execute: async ({ turn }) => toolOutput(turn),
});

test("the middleware records every call and serves Recall's compacted prompt", live, async (t) => {
  const recall = client();
  const sessionId = sessionName("aisdk");
  const prompts = [];
  const middleware = recallMiddleware({ url: RECALL_HTTP, sessionId, threshold: 6000, onError: (e) => t.diagnostic(`recall could not help: ${e}`) });
  const model = wrapLanguageModel({ model: scripted(prompts), middleware });
  const messages = [];
  let compacted = 0;
  for (let turn = 1; turn <= 40; turn++) {
    messages.push({ role: "user", content: `turn ${turn}: look up the value of turn ${turn}` });
    const args = { model, system: "Look things up.", messages, tools: { lookup }, stopWhen: stepCountIs(3) };
    const r = turn % 5 === 0 ? streamText(args) : await generateText(args);
    const text = await r.text;
    assert.equal(text, `turn ${turn} done: value-${turn}`);
    messages.push(...(await r.responseMessages));
    const first = prompts.at(-1).find((m) => m.role !== "system");
    if (first.providerOptions?.recall?.summary) compacted++;
    if (turn % 10 === 0) await recall.extract(sessionId, { timeoutMs: 40_000 });
  }
  t.diagnostic(`compacted prompts on ${compacted}/40 turns; last prompt ${prompts.at(-1).length} messages, history ${messages.length}`);
  assert.ok(compacted >= 15, `Recall's context replaced the prompt on ${compacted} turns`);
  assert.equal(prompts.at(-1)[0].role, "system", "the system prompt stays first");
  await middleware.recall.queue; // the last response is recorded in the background
  const lines = (await recall.exportSession(sessionId)).filter((l) => l.type === "user" || l.type === "assistant");
  // One record per message (user, assistant call, tool result, assistant answer), none twice.
  assert.equal(lines.length, 160, "every message recorded once");
  assert.equal(new Set(lines.map((l) => l.uuid)).size, 160);
  const calls = lines.flatMap((l) => l.message.content.filter((b) => b.type === "tool_use").map((b) => b.id));
  assert.deepEqual(calls, Array.from({ length: 40 }, (_, i) => `call_${i + 1}`), "calls in order");
});

test("recallPrepareStep compacts a ToolLoop's messages and carries them forward", live, async (t) => {
  const recall = client();
  const sessionId = sessionName("aistep");
  const prompts = [];
  const prepareStep = recallPrepareStep({ url: RECALL_HTTP, sessionId, threshold: 6000 });
  const model = scripted(prompts);
  let messages = [];
  for (let turn = 1; turn <= 20; turn++) {
    messages.push({ role: "user", content: `turn ${turn}: look up the value of turn ${turn}` });
    const r = await generateText({ model, messages, tools: { lookup }, stopWhen: stepCountIs(3), prepareStep });
    assert.equal(r.text, `turn ${turn} done: value-${turn}`);
    messages.push(...r.responseMessages);
    if (turn % 5 === 0) await recall.extract(sessionId, { timeoutMs: 40_000 });
  }
  assert.ok(prepareStep.recall.lastCompaction, "a compaction was served");
  const lines = (await recall.exportSession(sessionId)).filter((l) => l.type === "user" || l.type === "assistant");
  assert.equal(new Set(lines.map((l) => l.uuid)).size, lines.length, "no message recorded twice");
  assert.ok(lines.length >= 79, `${lines.length} records`);
  t.diagnostic(`${lines.length} records; last prompt ${prompts.at(-1).length} messages`);
});
