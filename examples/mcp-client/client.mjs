// An MCP client of `recall mcp` written with the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk): it starts `recall mcp` over stdio, lists the
// tools, calls every one against a real Recall holding one session and
// asserts non-error results, reads the session's notes as a resource, then
// starts `recall mcp --http` and does the same once over streamable HTTP.
//
//   RECALL_BIN      the recall binary (default ../../.ci/bin/recall)
//   RECALL_URL      Recall's HTTP edge (default http://127.0.0.1:8080)
//   RECALL_SESSION  a replayed and extracted session (default demo1)
//   MCP_HTTP        address for `recall mcp --http` (default 127.0.0.1:18290)
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const bin = resolve(process.env.RECALL_BIN ?? resolve(here, "../../.ci/bin/recall"));
const recallURL = process.env.RECALL_URL ?? "http://127.0.0.1:8080";
const session = process.env.RECALL_SESSION ?? "demo1";
const mcpHTTP = process.env.MCP_HTTP ?? "127.0.0.1:18290";

const wantTools = ["ask_session", "compact_session", "edit_context", "extract_session", "get_session_memory",
  "get_user_memory", "list_sessions", "resolve_references"];

function check(cond, what, detail) {
  if (!cond) {
    throw new Error(`${what}${detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 2000)}`);
  }
}

const textOf = (res) => (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

// call calls a tool and returns its structured output; a tool error fails.
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args }, undefined, { timeout: 180_000 });
  check(!res.isError, `${name} returned a tool error`, textOf(res));
  check(res.structuredContent, `${name} returned no structured content`, res);
  return res.structuredContent;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitIndexed(client) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ls = await call(client, "list_sessions", { limit: 50 });
    const s = ls.sessions.find((x) => x.session === session);
    if (s?.indexed) return s;
    check(Date.now() < deadline, `session ${session} not indexed within 60 s`, ls);
    await sleep(250);
  }
}

async function checkTools(client) {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(wantTools), "tools/list", names);
  for (const t of tools) {
    check(t.description && t.inputSchema?.type === "object" && t.outputSchema, `tool ${t.name} lacks a description or schemas`, t);
  }
  console.log(`tools/list: ${names.join(", ")}`);
}

async function callEveryTool(client) {
  const ex = await call(client, "extract_session", { session });
  check(ex.success && ex.up_to_seq > 0, "extract_session", ex);
  const mem = await call(client, "get_session_memory", { session });
  check(mem.notes.length > 0, "get_session_memory: empty notes", mem);
  const cp = await call(client, "compact_session", { session });
  check(cp.served && cp.summary.length > 0 && cp.tokens_before > 0, "compact_session", cp);
  const pv = await call(client, "compact_session", { session, preview: true, context_tokens: 180000 });
  check(pv.outcome, "compact_session preview", pv);
  const ed = await call(client, "edit_context", { session, trigger_tokens: 1, keep_tool_uses: 2 });
  check(ed.clear.length > 0 && ed.tokens_after < ed.tokens_before, "edit_context cleared nothing", ed);
  const entry = await waitIndexed(client);
  const ask = await call(client, "ask_session", { session, question: "Which flag was added to tally sum?" });
  check(ask.answer.length > 0, "ask_session", ask);
  const rs = await call(client, "resolve_references", { text: `As in @@${entry.name || session}: which flag was added?`, answer: true });
  check(rs.resolved.length === 1 && rs.resolved[0].session.session === session && rs.context, "resolve_references", rs);
  const um = await call(client, "get_user_memory", { user: "u-7" });
  check(um.user === "u-7" && Array.isArray(um.documents), "get_user_memory", um);
  console.log(`tools: ${cp.outcome}, ${cp.kept_count} kept, ${cp.tokens_before} -> ${cp.tokens_after} tokens; ` +
    `edit clears ${ed.clear.length} blocks; ${session} is "${entry.name}"; memory rev ${mem.revision}`);

  const bad = await client.callTool({ name: "get_session_memory", arguments: { session: "no-such-session" } });
  check(bad.isError && /404/.test(textOf(bad)), "a missing session is a tool error with the 404", bad);
}

async function checkResources(client) {
  const uri = `recall://sessions/${session}/memory`;
  const { resourceTemplates } = await client.listResourceTemplates();
  check(resourceTemplates.some((t) => t.uriTemplate === "recall://sessions/{session}/memory"), "resources/templates/list", resourceTemplates);
  const { resources } = await client.listResources();
  check(resources.some((r) => r.uri === uri), "resources/list", resources);
  const rr = await client.readResource({ uri });
  check(rr.contents.length === 1 && rr.contents[0].mimeType === "text/markdown" && rr.contents[0].text, "resources/read", rr);
  console.log(`resources: ${resources.length} listed, ${uri} is ${rr.contents[0].text.length} chars`);
}

async function overStdio() {
  const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: { ...process.env, RECALL_URL: recallURL }, stderr: "inherit" });
  const client = new Client({ name: "recall-mcp-ci", version: "1.0.0" });
  await client.connect(transport);
  try {
    console.log(`stdio: connected to ${client.getServerVersion()?.name} ${client.getServerVersion()?.version}`);
    await checkTools(client);
    await callEveryTool(client);
    await checkResources(client);
  } finally {
    await client.close();
  }
}

async function overHTTP() {
  const proc = spawn(bin, ["mcp", "--http", mcpHTTP, "--recall-url", recallURL], { stdio: ["ignore", "inherit", "inherit"] });
  const exited = new Promise((r) => proc.on("exit", r));
  try {
    const url = new URL(`http://${mcpHTTP}/mcp`);
    let client;
    const deadline = Date.now() + 20_000;
    for (;;) {
      client = new Client({ name: "recall-mcp-ci-http", version: "1.0.0" });
      try {
        await client.connect(new StreamableHTTPClientTransport(url));
        break;
      } catch (err) {
        check(Date.now() < deadline && proc.exitCode === null, `connecting to ${url}`, String(err));
        await sleep(200);
      }
    }
    await checkTools(client);
    const ls = await call(client, "list_sessions", {});
    check(ls.sessions.some((s) => s.session === session), "list_sessions over HTTP", ls);
    await checkResources(client);
    await client.close();
    console.log(`streamable HTTP: ${url} ok`);
  } finally {
    proc.kill("SIGTERM");
    await exited;
  }
}

await overStdio();
await overHTTP();
console.log("recall mcp: every tool answered over stdio and streamable HTTP");
