// claudecode-loop.mjs: the real Claude Code CLI through the Recall gateway, in
// a loop of CALLS tool calls scripted by the upstream (.ci/gateway-clients
// starts both), in two variants:
//
//   client-compaction  the CLI's context fills and it auto-compacts; the
//                      gateway answers each summarization turn from Recall's
//                      memory, so none reaches the upstream;
//   compact-above      tenant config gateway.compact_above_tokens is set; the
//                      gateway sends the upstream summary + kept window, the
//                      CLI's context never fills and it never compacts.
//
//   passthrough        only that the loop goes through the gateway (the
//                      CLI finishes, every upstream request valid, every call
//                      seen), whoever answers its summarization turns;
//   refused-without-token  (with tenants) the CLI without its x-recall-token
//                      header is refused in the API's shape, nothing forwarded.
//
// Both loops: the CLI finishes with the final answer; every request the upstream got
// is valid (lib/check.mjs); every tool call and its result is stored once in
// Recall's transcript of the session (its export), nothing of the CLI's
// summarization turn or of its post-compaction restatement is stored as user
// input. Run: node test/clients/claudecode-loop.mjs [VARIANT...]
// Env: GATEWAY_URL, UPSTREAM_URL, RECALL_URL, PROJECT (the upstream's
// -command cats PROJECT/f{i}.txt), CALLS, CLAUDE_BIN, COMPACT_ABOVE, RECALL_TOKEN
// (the tenant token, sent through ANTHROPIC_CUSTOM_HEADERS; empty: open mode).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { anthropicProblem, fail, ok } from "./lib/check.mjs";
import { isOff } from "./lib/run.mjs";
import { blocksOf, exportSession, need, poll, recallJSON, token, upstreamRequests } from "./lib/env.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const gateway = need("GATEWAY_URL");
const upstream = need("UPSTREAM_URL");
const recall = need("RECALL_URL");
const project = need("PROJECT");
const calls = Number(process.env.CALLS || 110);
const compactAbove = Number(process.env.COMPACT_ABOVE || 40000);
const claudeBin = process.env.CLAUDE_BIN || path.join(here, "node_modules", ".bin", "claude");
const FINAL = process.env.FINAL || "All files read.";
const COMPACT_PROMPT = "Your task is to create a detailed summary of the conversation";
const CONTINUED = "This session is being continued from a previous conversation";

// writeFiles writes PROJECT/f1.txt … f{calls}.txt, each about 20 KB (5k
// tokens as the upstream reports usage), distinct per file.
function writeFiles() {
  fs.mkdirSync(project, { recursive: true });
  for (let i = 1; i <= calls + 5; i++) {
    const lines = [];
    for (let j = 1, n = 0; n < 20000; j++) {
      const l = `file ${i} line ${j}: entry ${(i * 31 + j * 7) % 9973} of the ledger is checked and filed.`;
      lines.push(l);
      n += l.length + 1;
    }
    fs.writeFileSync(path.join(project, `f${i}.txt`), lines.join("\n") + "\n");
  }
}

// runClaude runs the CLI headless against the gateway and returns its exit
// code, its JSON result and its HOME (where its own transcript is).
function runClaude(session, { withToken = true } = {}) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "cc-home-"));
  const env = {
    PATH: process.env.PATH, HOME: home, TERM: "dumb",
    ANTHROPIC_BASE_URL: process.env.CLAUDE_BASE_URL || `${gateway}/anthropic`, ANTHROPIC_API_KEY: "sk-ant-ci-not-a-key",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_TELEMETRY: "1", DISABLE_AUTOUPDATER: "1",
    CLAUDE_CODE_AUTO_COMPACT_WINDOW: "100000", // compacts at about 67k reported tokens (the default model's window is 1M)
  };
  // The tenant's Recall token, as docs/gateway.md tells Claude Code users to pass it.
  if (token && withToken) env.ANTHROPIC_CUSTOM_HEADERS = `x-recall-token: ${token}`;
  const prompt = `Read the files f1.txt to f${calls}.txt in ${project} one at a time with cat, then say: ${FINAL}`;
  return new Promise((resolve) => {
    const child = spawn(claudeBin, ["-p", prompt, "--session-id", session, "--allowedTools", "Bash(cat:*)", "--output-format", "json"],
      { cwd: project, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "", stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), withToken ? 150_000 : 30_000);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      let result = null;
      try { result = JSON.parse(stdout); } catch { /* reported below */ }
      resolve({ code, signal, result, stdout, stderr, home });
    });
  });
}

// localCompactions counts the compact boundaries in the CLI's own transcript.
function localCompactions(home, session) {
  let n = 0;
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name === `${session}.jsonl`) n += fs.readFileSync(p, "utf8").split("\n").filter((l) => l.includes('"compact_boundary"')).length;
    }
  };
  const dir = path.join(home, ".claude", "projects");
  if (fs.existsSync(dir)) walk(dir);
  return n;
}

const lastUserText = (msgs) => {
  for (let i = msgs.length - 1; i >= 0; i--) if (msgs[i].role === "user") return blocksOf(msgs[i]).filter((b) => b.type === "text").map((b) => b.text).join("\n");
  return "";
};
const firstUserText = (msgs) => {
  const m = msgs.find((x) => x.role === "user");
  return m ? blocksOf(m).filter((b) => b.type === "text").map((b) => b.text).join("\n") : "";
};

// checkUpstream checks what the upstream received for the session and
// returns the tool_use ids it saw and the facts the variant checks use.
function checkUpstream(reqs, session) {
  const mine = reqs.filter((q) => q.h("x-claude-code-session-id") === session);
  const msgsReqs = mine.filter((q) => q.api === "anthropic.messages");
  ok(msgsReqs.length >= calls, `the upstream got ${msgsReqs.length} messages requests of session ${session}, want at least ${calls} (one per tool call)`);
  const ids = new Set();
  let restated = 0, summarizations = 0, firstSummarization = "";
  for (const q of msgsReqs) {
    const msgs = (q.json && q.json.messages) || [];
    const problem = anthropicProblem(msgs);
    if (problem) fail(`upstream request #${q.n} of session ${session} is not valid for the Messages API`, { problem, roles: msgs.map((m) => m.role).join(",") });
    if (q.summarization || lastUserText(msgs).includes(COMPACT_PROMPT)) {
      summarizations++;
      firstSummarization ||= `#${q.n}, roles ${msgs.map((m) => m.role[0]).join("").slice(-6)} (the upstream ${q.summarization ? "recognized" : "did NOT recognize"} it)`;
    }
    const first = firstUserText(msgs);
    if (first.startsWith(CONTINUED)) {
      restated++;
      // The CLI keeps what was inside <summary>…</summary> after "Summary:".
      const summary = (first.split("Summary:")[1] || "").split("If you need specific details")[0].trim();
      ok(summary.length >= 40, `upstream request #${q.n}: the CLI's compacted history holds no summary (the gateway's answer to its summarization turn was not what it expects)`, { first: first.slice(0, 600) });
    }
    for (const m of msgs) for (const b of blocksOf(m)) if (b.type === "tool_use") ids.add(b.id);
    if (q.h("x-api-key") !== "sk-ant-ci-not-a-key") fail(`upstream request #${q.n}: the client's key did not pass through untouched`, { got: q.h("x-api-key") });
  }
  // For information: what the upstream's own check (pkg/memory's validator) says.
  const flagged = msgsReqs.filter((q) => q.invalid);
  if (flagged.length) console.log(`note: the scripted upstream's pkg/memory validator flags ${flagged.length} of ${msgsReqs.length} requests of ${session}, e.g. #${flagged[0].n}: ${flagged[0].invalid}`);
  return { ids, restated, summarizations, firstSummarization, requests: msgsReqs };
}

// checkStored checks Recall's transcript of the session: every tool call and
// every result once, the prompt once, no summarization turn or restated
// history stored as user input.
async function checkStored(session, ids, prompt) {
  const count = (records) => {
    const uses = new Map(), results = new Map(), bad = [];
    let prompts = 0;
    for (const r of records) {
      const msg = r.message;
      if (!msg || r.isSidechain) continue;
      for (const b of blocksOf(msg)) {
        if (b.type === "tool_use") uses.set(b.id, (uses.get(b.id) || 0) + 1);
        if (b.type === "tool_result") results.set(b.tool_use_id, (results.get(b.tool_use_id) || 0) + 1);
        if (msg.role === "user" && b.type === "text") {
          if (b.text.includes(prompt)) prompts++;
          if (b.text.includes(COMPACT_PROMPT) || b.text.startsWith(CONTINUED)) bad.push({ uuid: r.uuid, text: b.text.slice(0, 160) });
        }
      }
    }
    return { uses, results, prompts, bad };
  };
  const missing = (c) => [...ids].filter((id) => !c.uses.has(id) || !c.results.has(id));
  // Capture is asynchronous: wait until every call and result is stored.
  let c;
  try {
    c = await poll(`Recall to store the ${ids.size} tool calls of ${session}`, 30_000, async () => {
      const records = await exportSession(recall, session);
      if (!records) return undefined;
      const got = count(records);
      c = got;
      return missing(got).length === 0 ? got : undefined;
    });
  } catch (err) {
    const sessions = await recallJSON(recall, "GET", "/v1/sessions?limit=20").catch((e) => String(e));
    fail(`Recall did not store every tool call and result of session ${session}`, {
      error: String(err.message || err).split("\n")[0], missing: c ? missing(c).slice(0, 10) : "no export (404)",
      missing_count: c ? missing(c).length : ids.size, sessions: JSON.stringify(sessions).slice(0, 800),
    });
  }
  const twice = (m) => [...m].filter(([, n]) => n !== 1).slice(0, 10);
  ok(twice(c.uses).length === 0, `Recall stored a tool call of ${session} more than once`, { calls: twice(c.uses) });
  ok(twice(c.results).length === 0, `Recall stored a tool result of ${session} more than once`, { results: twice(c.results) });
  ok(c.prompts === 1, `Recall stored the user's prompt ${c.prompts} times, want once`);
  ok(c.bad.length === 0, "Recall stored the CLI's summarization turn or its restated history as user input", { records: c.bad.slice(0, 3) });
  return c;
}

async function variant(name) {
  const session = randomUUID();
  const started = Date.now();
  if (name === "compact-above") await recallJSON(recall, "PATCH", "/v1/config", { gateway: { compact_above_tokens: compactAbove } });
  let run;
  try {
    run = await runClaude(session);
  } finally {
    if (name === "compact-above") await recallJSON(recall, "PATCH", "/v1/config", { gateway: null });
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  if (run.code !== 0 || !run.result || run.result.subtype !== "success" || !String(run.result.result || "").includes(FINAL)) {
    const got = (await upstreamRequests(upstream)).filter((q) => q.h("x-claude-code-session-id") === session);
    fail(`${name}: Claude Code did not finish (exit ${run.code}${run.signal ? ", " + run.signal : ""}) after ${secs}s`, {
      upstream_requests_of_the_session: got.length,
      result: run.result ? JSON.stringify({ subtype: run.result.subtype, result: run.result.result, api_error_status: run.result.api_error_status }) : run.stdout.slice(-1500),
      stderr: run.stderr.slice(-1500),
    });
  }
  const up = checkUpstream(await upstreamRequests(upstream), session);
  if (name === "passthrough") {
    // Capture from the traffic: the CLI compacts through the upstream here, and
    // every call and result must still be stored once, no summarization turn or
    // restated history as user input.
    const stored = isOff("claudecode", "stored once") ? null : await checkStored(session, up.ids, `Read the files f1.txt to f${calls}.txt`);
    return passedThrough(name, up, run, session, secs, stored);
  }
  ok(up.summarizations === 0, `${name}: ${up.summarizations} summarization turns of Claude Code reached the upstream; the gateway must answer them from Recall's memory`, { first: up.firstSummarization });
  // A tool call the upstream gave to a request the CLI then dropped (a missed
  // summarization turn gets one) never shows up again: the loop has fewer.
  ok(up.ids.size >= calls, `${name}: the upstream saw ${up.ids.size} distinct tool calls of session ${session}, want ${calls}`);
  const local = localCompactions(run.home, session);
  if (name === "client-compaction") {
    ok(local >= 1 && up.restated >= 1, `${name}: Claude Code never compacted, so the check proves nothing (raise CALLS)`, { compact_boundaries: local, restated_requests: up.restated });
  } else {
    ok(local === 0 && up.restated === 0, `${name}: Claude Code compacted although the gateway should have kept its context under ${compactAbove} tokens`, { compact_boundaries: local, restated_requests: up.restated });
    const first = [...up.ids][0];
    const trimmed = up.requests.filter((q) => !q.raw.includes(first)).length;
    ok(trimmed >= 1, `${name}: no upstream request was compacted by the gateway (every one still holds the first tool call ${first})`);
  }
  const stored = await checkStored(session, up.ids, `Read the files f1.txt to f${calls}.txt`);
  fs.rmSync(run.home, { recursive: true, force: true });
  console.log(`claude code ${name}: ${calls} tool calls finished in ${secs}s; ${up.requests.length} upstream requests, all valid, none a summarization; CLI compactions ${local}; Recall stored ${stored.uses.size} calls and ${stored.results.size} results, each once`);
}

// passedThrough is what the passthrough variant checks: the loop went
// through the gateway (the CLI finished, every upstream request valid with
// the client's key, every tool call seen), whoever answered the CLI's
// summarization turns.
function passedThrough(name, up, run, session, secs, stored) {
  ok(up.ids.size >= calls, `${name}: the upstream saw ${up.ids.size} distinct tool calls of session ${session}, want ${calls}`, { first_summarization: up.firstSummarization });
  const local = localCompactions(run.home, session);
  fs.rmSync(run.home, { recursive: true, force: true });
  console.log(`claude code ${name}: ${calls} tool calls finished in ${secs}s; ${up.requests.length} upstream requests, all valid; CLI compactions ${local}, summarization turns answered by the upstream ${up.summarizations}${stored ? `; Recall stored ${stored.uses.size} calls and ${stored.results.size} results, each once` : ""}`);
}

// refused runs the CLI without its Recall token on a run with tenants: the
// gateway must refuse it in the API's error shape (the CLI shows it) and
// forward nothing.
async function refused() {
  if (!token) {
    console.log("claude code refused-without-token: open mode (no RECALL_TOKEN), nothing to refuse");
    return;
  }
  const session = randomUUID();
  const run = await runClaude(session, { withToken: false });
  const reqs = (await upstreamRequests(upstream)).filter((q) => q.h("x-claude-code-session-id") === session);
  ok(reqs.length === 0, `refused-without-token: ${reqs.length} requests of the CLI without a Recall token reached the upstream`);
  ok(run.signal !== "SIGKILL", "refused-without-token: Claude Code kept retrying the gateway's refusal for 30 s (it retries a 401 with backoff, about ten times, unless the answer says x-should-retry: false)");
  const shown = JSON.stringify(run.result || run.stdout);
  ok(run.code !== 0 || (run.result && run.result.is_error), "refused-without-token: Claude Code without its Recall token finished as if served", { result: shown.slice(0, 800) });
  ok(/\b40[13]\b/.test(shown), "refused-without-token: the CLI did not show the gateway's 401/403", { result: shown.slice(0, 800) });
  fs.rmSync(run.home, { recursive: true, force: true });
  console.log(`claude code refused-without-token: refused (${shown.slice(0, 160)}), nothing forwarded`);
}

writeFiles();
const variants = process.argv.slice(2).length ? process.argv.slice(2) : ["refused-without-token", "passthrough", "client-compaction", "compact-above"];
let failed = 0;
for (const v of variants) {
  if (isOff("claudecode", v)) {
    console.log(`OFF  claude code ${v} (in GATEWAY_CLIENTS_OFF)`);
    continue;
  }
  try {
    await (v === "refused-without-token" ? refused() : variant(v));
  } catch (err) {
    failed++;
    console.error(`FAIL claude code ${v}: ${err.message}`);
  }
}
process.exit(failed ? 1 : 0);
