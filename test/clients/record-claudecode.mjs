// record-claudecode.mjs: runs the real Claude Code CLI against a scripted
// Anthropic upstream on 127.0.0.1 and records every request it sends (method,
// path, headers with secrets redacted, body) and what the upstream answered, as
// the fixtures in services/gateway/gatewaysvc/testdata/claudecode/.
//
//   node test/clients/record-claudecode.mjs [OUTDIR]
//
// OUTDIR (default services/gateway/gatewaysvc/testdata/claudecode) is emptied first.
// CLAUDE_BIN (default: the claude of test/clients/node_modules) and
// RECORD_STEPS (tool calls on the main thread, default 45) can be set. The
// script drives single cat calls of small files whose results are reported as
// about 5k tokens each (see usageFor), so the CLI's context fills and it
// auto-compacts every ~11 calls (CLAUDE_CODE_AUTO_COMPACT_WINDOW=100000); at
// step 3 one answer with two parallel tool calls, at 5 text plus a tool call,
// at 7 an output over 30 KB (persisted-output preview), at 9 an Agent call
// whose subagent runs one cat of its own; then a final text answer.
// RECORD_SUMMARY=plain answers the compaction without the tags it asks for.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { spawn } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.resolve(process.argv[2] || path.join(here, "..", "..", "services", "gateway", "gatewaysvc", "testdata", "claudecode"));
const steps = Number(process.env.RECORD_STEPS || 45);
const claudeBin = process.env.CLAUDE_BIN || path.join(here, "node_modules", ".bin", "claude");
// Tool outputs are small (RECORD_FILE_CHARS) to keep the fixtures small; each
// tool_result in a request adds RESULT_TOKENS to the reported input_tokens, so
// the CLI's context fills as if every output were about 5k tokens.
const fileChars = Number(process.env.RECORD_FILE_CHARS || 2000);
const resultTokens = Number(process.env.RESULT_TOKENS || 4500);

const work = fs.mkdtempSync(path.join(os.tmpdir(), "cc-record-"));
const home = path.join(work, "home");
const proj = path.join(work, "proj");
fs.mkdirSync(home, { recursive: true });
fs.mkdirSync(proj, { recursive: true });
fs.rmSync(outDir, { recursive: true, force: true });
fs.mkdirSync(outDir, { recursive: true });

// fileText is a deterministic file of about n characters, numbered lines.
function fileText(name, n) {
  const lines = [];
  let size = 0;
  for (let i = 1; size < n; i++) {
    const line = `${name} line ${String(i).padStart(4, "0")}: the quick brown fox checks record ${i * 7 % 1000} of the ledger and moves on.`;
    lines.push(line);
    size += line.length + 1;
  }
  return lines.join("\n") + "\n";
}
for (let i = 1; i <= steps + 2; i++) {
  const name = `f${String(i).padStart(3, "0")}`;
  fs.writeFileSync(path.join(proj, `${name}.txt`), fileText(name, fileChars));
}
fs.writeFileSync(path.join(proj, "big.txt"), fileText("big", 40000));
fs.writeFileSync(path.join(proj, "sub.txt"), fileText("sub", 3000));

// save writes one request as NNN-kind.json. Its tools array, the same in most
// requests, is stored once as tools-<hash>.json and referenced as
// {"$ref": "tools-<hash>.json"}; everything else is the request as received.
const index = [];
function save(rec) {
  const name = `${String(rec.seq).padStart(3, "0")}-${rec.kind}.json`;
  const out = structuredClone(rec);
  if (out.body && Array.isArray(out.body.tools) && out.body.tools.length > 0) {
    const text = JSON.stringify(out.body.tools);
    const ref = `tools-${createHash("sha256").update(text).digest("hex").slice(0, 10)}.json`;
    const file = path.join(outDir, ref);
    if (!fs.existsSync(file)) fs.writeFileSync(file, JSON.stringify(out.body.tools, null, 1) + "\n");
    out.body.tools = { $ref: ref };
  }
  fs.writeFileSync(path.join(outDir, name), JSON.stringify(out, null, 1) + "\n");
  const msgs = (rec.body && rec.body.messages) || [];
  index.push({
    file: name, kind: rec.kind, method: rec.method, path: rec.path,
    agent_id: rec.headers["x-claude-code-agent-id"] || null,
    roles: msgs.map((m) => m.role[0]).join(""), messages: msgs.length,
    tool_results: rec.body && typeof rec.body === "object" ? countResults(rec.body) : 0,
    stop_reason: rec.response && rec.response.stop_reason,
  });
}

const REDACT = new Set(["x-api-key", "authorization", "cookie"]);
function redactHeaders(h) {
  const out = {};
  for (const [k, v] of Object.entries(h)) out[k] = REDACT.has(k.toLowerCase()) ? "REDACTED" : v;
  return out;
}

let seq = 0;
let answered = 0; // highest main-thread step whose result we have seen
const issued = new Map(); // tool_use id -> step
let agentDone = false;

function lastUser(body) {
  const msgs = body.messages || [];
  for (let i = msgs.length - 1; i >= 0; i--) if (msgs[i].role === "user") return msgs[i];
  return null;
}
function blocks(m) {
  if (!m) return [];
  return typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content || [];
}
function textOf(m) {
  return blocks(m).filter((b) => b.type === "text").map((b) => b.text).join("\n");
}
function classify(req, body) {
  const text = textOf(lastUser(body));
  if (/summary of the conversation|summarize the conversation|detailed summary/i.test(text)) return "compaction";
  if (req.headers["x-claude-code-agent-id"]) return "subagent";
  const names = (body.tools || []).map((t) => t.name);
  if (!names.includes("Bash")) return "auxiliary";
  return "main";
}

const toolUse = (cmd, desc) => ({ type: "tool_use", id: `toolu_${randomUUID().replace(/-/g, "").slice(0, 24)}`, name: "Bash", input: { command: cmd, description: desc } });

function mainAnswer(body) {
  for (const m of body.messages || []) {
    for (const b of blocks(m)) {
      if (b.type === "tool_result" && issued.has(b.tool_use_id)) answered = Math.max(answered, issued.get(b.tool_use_id));
    }
  }
  const step = answered + 1;
  const mark = (blocksOut, stopReason) => {
    for (const b of blocksOut) if (b.type === "tool_use") issued.set(b.id, step);
    return { content: blocksOut, stop_reason: stopReason };
  };
  const f = (i) => `cat ${path.join(proj, `f${String(i).padStart(3, "0")}.txt`)}`;
  if (step > steps) return { content: [{ type: "text", text: `All ${steps} files read. Done.` }], stop_reason: "end_turn" };
  if (step === 3) return mark([toolUse(f(step), "Read file"), toolUse(f(steps + 1), "Read another file")], "tool_use");
  if (step === 5) return mark([{ type: "text", text: `Reading file ${step} next.` }, toolUse(f(step), "Read file")], "tool_use");
  if (step === 7) return mark([toolUse(`cat ${path.join(proj, "big.txt")}`, "Read the big file")], "tool_use");
  if (step === 9 && !agentDone) {
    return mark([{ type: "tool_use", id: `toolu_${randomUUID().replace(/-/g, "").slice(0, 24)}`, name: "Agent", input: { description: "Read sub file", prompt: `Run cat ${path.join(proj, "sub.txt")} and report its first line.`, subagent_type: "general-purpose" } }], "tool_use");
  }
  return mark([toolUse(f(step), "Read file")], "tool_use");
}

function subagentAnswer(body) {
  const done = (body.messages || []).some((m) => blocks(m).some((b) => b.type === "tool_result"));
  if (done) { agentDone = true; return { content: [{ type: "text", text: "The first line of sub.txt is 'sub line 0001'." }], stop_reason: "end_turn" }; }
  return { content: [toolUse(`cat ${path.join(proj, "sub.txt")}`, "Read sub file")], stop_reason: "tool_use" };
}

const SUMMARY = "<analysis>\nThe user asked to read the numbered files one by one with cat.\n</analysis>\n\n<summary>\n1. Primary Request and Intent:\n   Read every numbered file fNNN.txt with cat, one per tool call, then say Done.\n\n2. Key Technical Concepts:\n   - cat through the Bash tool\n\n3. Files and Code Sections:\n   - the fNNN.txt files in the project directory\n\n4. Errors and fixes: none.\n\n5. Problem Solving: none needed.\n\n6. All user messages:\n   - the prompt asking to read the files\n\n7. Pending Tasks:\n   - read the remaining files\n\n8. Current Work:\n   Reading the files in order.\n\n9. Optional Next Step:\n   Read the next file.\n</summary>";

function answer(kind, body) {
  switch (kind) {
    case "compaction": {
      // RECORD_SUMMARY=plain answers without the <analysis>/<summary> tags the prompt asks for.
      const text = process.env.RECORD_SUMMARY === "plain" ? "The user asked to read the numbered files with cat; the next file is due." : SUMMARY;
      return { content: [{ type: "text", text }], stop_reason: "end_turn" };
    }
    case "subagent": return subagentAnswer(body);
    case "main": return mainAnswer(body);
    default: return { content: [{ type: "text", text: "Reading files" }], stop_reason: "end_turn" };
  }
}

function countResults(body) {
  let n = 0;
  for (const m of body.messages || []) for (const b of blocks(m)) if (b.type === "tool_result") n++;
  return n;
}
function usageFor(raw, body, out) {
  return { input_tokens: Math.ceil(raw.length / 4) + resultTokens * countResults(body), output_tokens: Math.max(1, Math.ceil(JSON.stringify(out.content).length / 4)), cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
}

function sse(res, model, out, usage) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "request-id": `req_${seq}` });
  const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  const id = `msg_${randomUUID().replace(/-/g, "").slice(0, 24)}`;
  ev("message_start", { message: { id, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
  out.content.forEach((b, index) => {
    if (b.type === "text") {
      ev("content_block_start", { index, content_block: { type: "text", text: "" } });
      ev("content_block_delta", { index, delta: { type: "text_delta", text: b.text } });
    } else {
      ev("content_block_start", { index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
      ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: JSON.stringify(b.input) } });
    }
    ev("content_block_stop", { index });
  });
  ev("message_delta", { delta: { stop_reason: out.stop_reason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } });
  ev("message_stop", {});
  res.end();
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks).toString("utf8");
    let body = null;
    try { body = raw ? JSON.parse(raw) : null; } catch { body = raw; }
    const n = ++seq;
    const rec = { seq: n, method: req.method, path: req.url, headers: redactHeaders(req.headers), body };
    let reply;
    const u = new URL(req.url, "http://x");
    if (req.method === "POST" && u.pathname === "/v1/messages/count_tokens") {
      reply = { status: 200, json: { input_tokens: Math.ceil(raw.length / 4) } };
    } else if (req.method === "POST" && u.pathname === "/v1/messages" && body && typeof body === "object") {
      const kind = classify(req, body);
      const out = answer(kind, body);
      const usage = usageFor(raw, body, out);
      rec.kind = kind;
      rec.response = { stream: !!body.stream, content: out.content, stop_reason: out.stop_reason, usage };
      save(rec);
      console.error(`#${n} ${kind} msgs=${(body.messages || []).length} chars=${raw.length} -> ${out.stop_reason} answered=${answered}`);
      if (body.stream) return sse(res, body.model, out, usage);
      res.writeHead(200, { "content-type": "application/json", "request-id": `req_${n}` });
      return res.end(JSON.stringify({ id: `msg_${n}`, type: "message", role: "assistant", model: body.model, content: out.content, stop_reason: out.stop_reason, stop_sequence: null, usage }));
    } else {
      reply = { status: 404, json: { type: "error", error: { type: "not_found_error", message: `scripted upstream: no ${req.method} ${u.pathname}` } } };
    }
    rec.response = reply;
    rec.kind = u.pathname === "/v1/messages/count_tokens" ? "count_tokens" : "other";
    save(rec);
    console.error(`#${n} other ${req.method} ${req.url} -> ${reply.status}`);
    res.writeHead(reply.status, { "content-type": "application/json" });
    res.end(JSON.stringify(reply.json));
  });
});

server.listen(0, "127.0.0.1", () => {
  const { port } = server.address();
  const sessionId = randomUUID();
  const prompt = `Read the files f001.txt to f${String(steps).padStart(3, "0")}.txt in ${proj} one at a time with cat, then say Done.`;
  const env = {
    PATH: process.env.PATH, HOME: home, TERM: "dumb",
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`, ANTHROPIC_API_KEY: "sk-ant-scripted-not-a-key",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_TELEMETRY: "1", DISABLE_AUTOUPDATER: "1",
    // The default model has a 1M-token window; 100k (the smallest accepted) makes it compact within a few dozen calls.
    CLAUDE_CODE_AUTO_COMPACT_WINDOW: process.env.CLAUDE_CODE_AUTO_COMPACT_WINDOW || "100000",
  };
  const child = spawn(claudeBin, ["-p", prompt, "--session-id", sessionId, "--allowedTools", "Bash(cat:*)", "Agent", "--output-format", "json"], { cwd: proj, env, stdio: ["ignore", "pipe", "inherit"] });
  let stdout = "";
  child.stdout.on("data", (c) => (stdout += c));
  const timer = setTimeout(() => child.kill("SIGKILL"), 600_000);
  child.on("exit", (code) => {
    clearTimeout(timer);
    fs.writeFileSync(path.join(outDir, "result.json"), stdout);
    index.sort((a, b) => a.file.localeCompare(b.file));
    fs.writeFileSync(path.join(outDir, "index.json"), JSON.stringify(index, null, 1) + "\n");
    console.error(`claude exited ${code}; ${seq} requests; session ${sessionId}; work dir ${work}`);
    server.close();
    if (!process.env.RECORD_KEEP) fs.rmSync(work, { recursive: true, force: true });
    process.exit(code === 0 ? 0 : 1);
  });
});
