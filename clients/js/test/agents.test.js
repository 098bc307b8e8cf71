// RecallSession with the real OpenAI Agents SDK (@openai/agents) and a
// scripted model (the SDK's own Model interface) against a real recall up:
// a 40-turn tool-using agent whose history Recall compacts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { isDeepStrictEqual } from "node:util";
import { Agent, run, setTracingDisabled, tool, Usage } from "@openai/agents";
import { isOpenAIResponsesCompactionAwareSession } from "@openai/agents-core";
import { z } from "zod";
import { RecallSession } from "../src/agents.js";
import { client, live, RECALL_HTTP, sessionName, toolOutput } from "./live.js";

setTracingDisabled(true);

const usage = () => new Usage({ requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 });

/**
 * A scripted model: to a user turn "turn N: …" it answers with a call of
 * lookup({turn: N}); to that call's output it answers "turn N done: value-N".
 * It checks every input it gets as the Responses API would: calls answered,
 * no output without its call, the turn's request present.
 */
class ScriptedModel {
  constructor() {
    this.inputs = [];
    this.responses = 0;
  }
  check(input) {
    const calls = new Set();
    for (const it of input) {
      if (it.type === "function_call") calls.add(it.callId);
      if (it.type === "function_call_result") assert.ok(calls.has(it.callId), `output ${it.callId} has no call before it`);
    }
    const answered = new Set(input.filter((i) => i.type === "function_call_result").map((i) => i.callId));
    for (const c of calls) assert.ok(answered.has(c), `call ${c} is unanswered`);
  }
  respond(request) {
    const input = typeof request.input === "string" ? [{ role: "user", content: request.input }] : request.input;
    this.inputs.push(input);
    const last = input.at(-1);
    const id = `resp_${++this.responses}`;
    if (last.type === "function_call_result") {
      this.check(input);
      const turn = /value-(\d+)/.exec(typeof last.output === "string" ? last.output : last.output.text)[1];
      return { usage: usage(), responseId: id, output: [{ type: "message", role: "assistant", status: "completed", id: `msg_${id}`, content: [{ type: "output_text", text: `turn ${turn} done: value-${turn}` }] }] };
    }
    this.check(input);
    const turn = /turn (\d+):/.exec(typeof last.content === "string" ? last.content : last.content[0].text)[1];
    return { usage: usage(), responseId: id, output: [{ type: "function_call", callId: `call_${turn}`, name: "lookup", arguments: JSON.stringify({ turn: Number(turn) }), status: "completed", id: `fc_${turn}` }] };
  }
  async getResponse(request) {
    return this.respond(request);
  }
  async *getStreamedResponse(request) {
    const r = this.respond(request);
    yield { type: "response_started" };
    yield { type: "response_done", response: { id: r.responseId, usage: { requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 }, output: r.output } };
  }
}

const lookup = tool({
  name: "lookup",
  description: "Looks up the value of a turn",
  parameters: z.object({ turn: z.number() }),
  execute: async ({ turn }) => toolOutput(turn),
});

test("RecallSession is a compaction-aware Session of the SDK", () => {
  const s = new RecallSession({ url: "http://127.0.0.1:1", sessionId: "x" });
  assert.ok(isOpenAIResponsesCompactionAwareSession(s));
  assert.equal(s.runCompaction(), null, "no model call, nothing to wait for");
});

test("a 40-turn tool-using agent continues on Recall's compacted history", live, async (t) => {
  const recall = client();
  const sessionId = sessionName("agents");
  const session = new RecallSession({ url: RECALL_HTTP, sessionId, token: process.env.RECALL_TOKEN || null, started: { userId: "u-agents", agentId: "scripted" } });
  const added = [];
  const addItems = session.addItems.bind(session);
  session.addItems = (items) => (added.push(...structuredClone(items)), addItems(items));
  const model = new ScriptedModel();
  const agent = new Agent({ name: "builder", instructions: "Look things up.", model, tools: [lookup] });
  let compactedTurns = 0;
  for (let turn = 1; turn <= 40; turn++) {
    const input = `turn ${turn}: look up the value of turn ${turn}`;
    const stream = turn % 4 === 0;
    const result = stream ? await run(agent, input, { session, stream: true }) : await run(agent, input, { session });
    if (stream) {
      for await (const _ of result); // drain the stream
      await result.completed;
    }
    assert.equal(result.finalOutput, `turn ${turn} done: value-${turn}`, `turn ${turn}`);
    const first = model.inputs.at(-2)[0];
    if (session.lastCompaction) {
      compactedTurns++;
      assert.match(typeof first.content === "string" ? first.content : "", /Recall compacted/, "the summary comes first");
    }
    if (turn % 10 === 0) await recall.extract(session.recallSessionId, { timeoutMs: 40_000 }); // the notes catch up
  }
  assert.ok(compactedTurns >= 20, `Recall's summary served on ${compactedTurns} of 40 turns`);
  const lastInput = model.inputs.at(-1);
  t.diagnostic(`summary served on ${compactedTurns}/40 turns; last model input ${lastInput.length} items of ${added.length} added`);
  assert.ok(lastInput.length < added.length / 2, `the compacted history (${lastInput.length} items) is shorter than the whole (${added.length})`);

  // Every item round-trips: the history items after the summary are the ones added, deep-equal.
  const view = await session.getItems();
  const from = added.findIndex((it) => isDeepStrictEqual(it, view[1]));
  assert.ok(from > 0, "the first kept item is one of the added ones");
  assert.deepEqual(view.slice(1), added.slice(from), "kept items are the newest added ones, deep-equal");
  // No loss, no duplicates, in order: the stored transcript is what was added.
  const lines = (await recall.exportSession(session.recallSessionId)).filter((l) => l.type === "user" || l.type === "assistant");
  assert.equal(lines.length, added.length, "one record per item");
  assert.equal(new Set(lines.map((l) => l.uuid)).size, lines.length, "no duplicates");
  assert.deepEqual(lines.map((l) => l.uuid), session.records.map((r) => r.uuid), "in order");
  assert.equal(added.filter((i) => i.type === "function_call").length, 40);
  assert.equal(added.filter((i) => i.type === "function_call_result").length, 40);
});

test("addItems stores each record once when repeated; popItem and clearSession keep Recall consistent", live, async () => {
  const recall = client();
  const session = new RecallSession({ url: RECALL_HTTP, sessionId: sessionName("pop"), compaction: false });
  const items = [
    { role: "user", content: "first" },
    { type: "function_call", callId: "c1", name: "t", arguments: "{}", status: "completed" },
    { type: "function_call_result", callId: "c1", name: "t", status: "completed", output: "r1" },
  ];
  await session.addItems(items);
  // A caller repeating the call (its reply lost) with the same items: same ids, stored once.
  session.records.splice(-3);
  await session.addItems(items);
  let lines = await recall.exportSession(session.recallSessionId);
  assert.equal(lines.length, 3, "the repeat is a duplicate");
  assert.deepEqual(await session.popItem(), items[2]);
  assert.deepEqual(await session.getItems(), items.slice(0, 1), "the call whose output was popped is left out");
  // A fresh RecallSession reads the history back from Recall, the pop included.
  const again = new RecallSession({ url: RECALL_HTTP, sessionId: session.sessionId, compaction: false });
  assert.deepEqual((await again.getItems()).map((i) => i.content ?? i.callId), ["first"]);
  await session.clearSession();
  assert.deepEqual(await session.getItems(), []);
  await assert.rejects(recall.exportSession(session.sessionId), (e) => e.status === 404, "the erased session has no records");
  await session.addItems([{ role: "user", content: "after clear" }]);
  lines = await recall.exportSession(session.recallSessionId);
  assert.equal(lines.length, 1);
  assert.notEqual(session.recallSessionId, session.sessionId);
});
