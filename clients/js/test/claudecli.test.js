// The Claude Agent SDK's query() running the real Claude Code CLI of the
// lockfile against a scripted Anthropic Messages upstream (SSE), with
// RecallSessionStore: a 40-step tool-using run mirrored into Recall, then a
// resumed run that continues from the store.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { RecallSessionStore } from "../src/claude.js";
import { client, live, RECALL_HTTP } from "./live.js";

const STEPS = 40;

/** A scripted upstream: Read turn-N.txt while fewer than STEPS results came back, then answer. */
function upstream(dir, seen) {
  return createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (!req.url.startsWith("/v1/messages") || req.url.includes("count_tokens")) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ input_tokens: 10 }));
        return;
      }
      const b = JSON.parse(body || "{}");
      seen.push(b);
      const results = b.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((c) => c.type === "tool_result");
      const send = (e, d) => res.write(`event: ${e}\ndata: ${JSON.stringify({ type: e, ...d })}\n\n`);
      res.writeHead(200, { "content-type": "text/event-stream" });
      send("message_start", { message: { id: `msg_${seen.length}`, type: "message", role: "assistant", model: b.model, content: [], stop_reason: null, usage: { input_tokens: Math.ceil(body.length / 4), output_tokens: 1 } } });
      const last = JSON.stringify(b.messages.at(-1).content);
      let stop = "end_turn";
      if (results.length < STEPS && !/resume-check/.test(last)) {
        const n = results.length + 1;
        send("content_block_start", { index: 0, content_block: { type: "tool_use", id: `toolu_${String(n).padStart(3, "0")}`, name: "Read", input: {} } });
        send("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify({ file_path: join(dir, `turn-${n}.txt`) }) } });
        stop = "tool_use";
      } else {
        const text = /resume-check/.test(last) ? `I remember ${results.length} reads` : `read ${results.length} files`;
        send("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
        send("content_block_delta", { index: 0, delta: { type: "text_delta", text } });
      }
      send("content_block_stop", { index: 0 });
      send("message_delta", { delta: { stop_reason: stop }, usage: { output_tokens: 3 } });
      send("message_stop", {});
      res.end();
    });
  });
}

test("a 40-step Claude Code run mirrored into Recall, resumed from the store", { ...live, timeout: 150_000 }, async (t) => {
  const sdk = await import("@anthropic-ai/claude-agent-sdk");
  const recall = client();
  const dir = mkdtempSync(join(tmpdir(), "claude-work-"));
  for (let n = 1; n <= STEPS; n++) writeFileSync(join(dir, `turn-${n}.txt`), `value-${n}: ${"build log line\n".repeat(60)}`);
  const config = mkdtempSync(join(tmpdir(), "claude-config-"));
  mkdirSync(config, { recursive: true });
  const seen = [];
  const srv = upstream(dir, seen);
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const env = { ...process.env, ANTHROPIC_BASE_URL: `http://127.0.0.1:${srv.address().port}`, ANTHROPIC_API_KEY: "sk-scripted", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_TELEMETRY: "1", CLAUDE_CONFIG_DIR: config };
  const sessionStore = new RecallSessionStore({ url: RECALL_HTTP, store: new sdk.InMemorySessionStore(), onError: (e) => assert.fail(`Recall refused a batch: ${e}`) });
  const options = { sessionStore, cwd: dir, env, allowedTools: ["Read"] };
  try {
    let sessionId, result;
    for await (const m of sdk.query({ prompt: "Read every turn file", options })) if (m.type === "result") ({ session_id: sessionId, result } = m);
    assert.equal(result, `read ${STEPS} files`);
    const lines = (await recall.exportSession(sessionId)).filter((l) => l.type === "user" || l.type === "assistant");
    const uses = lines.flatMap((l) => l.message.content.filter?.((b) => b.type === "tool_use") ?? []).map((b) => b.id);
    const results = lines.flatMap((l) => (Array.isArray(l.message.content) ? l.message.content : []).filter((b) => b.type === "tool_result"));
    assert.deepEqual(uses, Array.from({ length: STEPS }, (_, i) => `toolu_${String(i + 1).padStart(3, "0")}`), "every call once, in order");
    assert.equal(results.length, STEPS, "every result once");
    assert.equal(new Set(lines.map((l) => l.uuid)).size, lines.length, "no record twice");
    await recall.extract(sessionId, { timeoutMs: 40_000 });
    const c = await sessionStore.compaction(sessionId);
    assert.ok(c.served, `Recall compacts the run: ${c.outcome} ${c.reason ?? ""}`);
    // Resumed from the store: the CLI sends the whole history back.
    for await (const m of sdk.query({ prompt: "resume-check: how many files?", options: { ...options, resume: sessionId } })) if (m.type === "result") result = m.result;
    assert.equal(result, `I remember ${STEPS} reads`);
    t.diagnostic(`${lines.length} records mirrored, ${seen.length} upstream requests; compaction ${c.outcome} ${c.tokens_before} → ${c.tokens_after} tokens`);
  } finally {
    srv.close();
  }
});
