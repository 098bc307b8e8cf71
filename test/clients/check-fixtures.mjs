// check-fixtures.mjs: the validator of lib/check.mjs against the recorded
// Claude Code requests (services/gateway/gatewaysvc/testdata/claudecode*):
// every request the real CLI sent must pass it, and each of a set of broken
// copies must fail it with the rule broken. Run: node test/clients/check-fixtures.mjs
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { anthropicProblem, chatProblem, fail, ok } from "./lib/check.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const testdata = path.join(here, "..", "..", "services", "gateway", "gatewaysvc", "testdata");

let checked = 0;
let compactions = 0;
for (const dir of ["claudecode", "claudecode-plain-summary"]) {
  for (const f of fs.readdirSync(path.join(testdata, dir)).filter((f) => /^\d{3}-(main|subagent|compaction)\.json$/.test(f))) {
    const rec = JSON.parse(fs.readFileSync(path.join(testdata, dir, f), "utf8"));
    const problem = anthropicProblem(rec.body.messages);
    ok(problem === "", `${dir}/${f}: a request the real Claude Code sent fails the validator`, { problem });
    checked++;
    if (rec.kind === "compaction") compactions++;
  }
}
ok(checked >= 50 && compactions >= 4, "too few fixtures found", { checked, compactions });

// Broken copies of one real request (the first compaction request: parallel
// calls, a system turn, a persisted-output preview, text after results).
const base = JSON.parse(fs.readFileSync(path.join(testdata, "claudecode", "014-compaction.json"), "utf8")).body.messages;
const mutate = (fn) => { const m = structuredClone(base); fn(m); return m; };
const firstUse = base.findIndex((m) => m.role === "assistant" && m.content.some((b) => b.type === "tool_use"));
const broken = {
  "a tool_result removed": mutate((m) => { m[firstUse + 1].content = [{ type: "text", text: "no result" }]; }),
  "a tool_use removed": mutate((m) => { m[firstUse].content = [{ type: "text", text: "no call" }]; }),
  "an empty text block": mutate((m) => { m[0].content[1].text = ""; }),
  "a system turn between call and result": mutate((m) => { m.splice(firstUse + 1, 0, { role: "system", content: "x" }); }),
  "two user turns in a row": mutate((m) => { m.splice(firstUse + 1, 0, { role: "user", content: "again" }); }),
  "an assistant turn first": mutate((m) => { m.shift(); m.shift(); }),
  "an unknown role": mutate((m) => { m[0].role = "tool"; }),
  "text before the results": mutate((m) => { m[firstUse + 1].content.unshift({ type: "text", text: "first" }); }),
  "empty content": mutate((m) => { m[firstUse].content = []; }),
};
for (const [name, msgs] of Object.entries(broken)) {
  ok(anthropicProblem(msgs) !== "", `the validator accepts a request with ${name}`);
}

// The Chat Completions rules, on a small valid exchange and broken copies.
const chat = [
  { role: "system", content: "be brief" }, { role: "user", content: "go" },
  { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "run", arguments: "{}" } }] },
  { role: "tool", tool_call_id: "c1", content: "out" }, { role: "assistant", content: "done" },
];
ok(chatProblem(chat) === "", "a valid chat exchange fails", { problem: chatProblem(chat) });
if (chatProblem([chat[0], chat[1], chat[2], chat[4]]) === "") fail("the chat validator accepts an unanswered call");
if (chatProblem([chat[0], chat[1], chat[3]]) === "") fail("the chat validator accepts a tool message without its call");
console.log(`fixtures: ${checked} real Claude Code requests valid (${compactions} compactions), ${Object.keys(broken).length} broken copies refused`);
