// The item ↔ record mapping: every kind of item round-trips deep-equal through
// its record and skeleton, and tool pairs stay whole.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fromRecord, pairToolItems, skeletonOf, toRecord, SKELETON_MAX } from "../src/items.js";

const items = [
  { role: "user", content: "Fix the flaky test" },
  { type: "message", role: "user", content: [{ type: "input_text", text: "and the lint" }, { type: "input_image", image: "https://x/y.png" }] },
  { type: "message", role: "system", content: "Be brief." },
  { type: "message", role: "assistant", status: "completed", id: "msg_1", content: [{ type: "output_text", text: "Looking.", providerData: { annotations: [] } }] },
  { type: "function_call", callId: "call_1", name: "read", arguments: '{"path":"a.go"}', status: "completed", id: "fc_1" },
  { type: "function_call", callId: "call_2", name: "grep", arguments: "not json", status: "completed" },
  { type: "function_call_result", callId: "call_1", name: "read", status: "completed", output: "package a" },
  { type: "function_call_result", callId: "call_2", name: "grep", status: "completed", output: { type: "text", text: "" } },
  { type: "function_call_output", call_id: "call_3", output: "python-style" },
  { type: "reasoning", id: "rs_1", content: [{ type: "input_text", text: "think" }], providerData: { encrypted: "zz" } },
  { type: "hosted_tool_call", name: "web_search", status: "completed", id: "ws_1" },
  { type: "compaction", encrypted_content: "opaque" },
];

test("every item comes back deep-equal from its record", () => {
  for (const item of items) {
    const rec = toRecord(item);
    assert.ok(rec.content.length > 0 && rec.content.every((b) => b.type !== "text" || b.text.trim()), `blank block for ${JSON.stringify(item)}`);
    const skel = skeletonOf(item, rec.content);
    assert.ok(skel, "a skeleton");
    assert.deepEqual(fromRecord(rec.content, skel), item);
  }
});

test("the skeleton leaves out what the blocks rebuild", () => {
  const big = "x".repeat(10_000);
  const rec = toRecord({ role: "user", content: big });
  assert.ok(skeletonOf({ role: "user", content: big }, rec.content).length < 100);
  const out = { type: "function_call_result", callId: "c", name: "n", status: "completed", output: big };
  assert.ok(skeletonOf(out, toRecord(out).content).length < 150);
  const huge = { type: "function_call_result", callId: "c", name: "n", status: "completed", output: { type: "json", v: "y".repeat(SKELETON_MAX) } };
  assert.equal(skeletonOf(huge, toRecord(huge).content), undefined, "too large to carry: inferred when read");
});

test("records without a skeleton are inferred, outputs named after their calls", () => {
  const names = new Map([["call_1", "read"]]);
  assert.deepEqual(fromRecord([{ type: "tool_result", tool_use_id: "call_1", content: [{ type: "text", text: "ok" }] }], undefined, { names }), {
    type: "function_call_result", callId: "call_1", name: "read", status: "completed", output: { type: "text", text: "ok" },
  });
  assert.equal(fromRecord([{ type: "tool_use", id: "c", name: "n", input: { a: 1 } }]).arguments, '{"a":1}');
  assert.equal(fromRecord([{ type: "text", text: "hi" }], undefined, { role: "assistant" }).content[0].text, "hi");
});

test("pairToolItems leaves out unanswered calls and orphaned outputs", () => {
  const call = (id) => ({ type: "function_call", callId: id, name: "t", arguments: "{}" });
  const out = (id) => ({ type: "function_call_result", callId: id, name: "t", output: "o" });
  const user = { role: "user", content: "u" };
  const got = pairToolItems([out("a"), user, call("b"), out("b"), out("b"), call("c"), user, call("d")]);
  assert.deepEqual(got, [user, call("b"), out("b"), call("c"), user].filter((x, i) => i !== 3));
  assert.deepEqual(pairToolItems([call("p"), call("q"), out("q"), out("p")]), [call("p"), call("q"), out("q"), out("p")]);
});
