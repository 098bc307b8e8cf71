// RecallSessionStore with the real Claude Agent SDK: the SDK's own
// importSessionToStore copies a real Claude Code transcript
// (internal/importer/testdata/coding-session.jsonl) through append, and its
// getSessionMessages / deleteSession read and delete through the store.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { entryEvent, RecallSessionStore } from "../src/claude.js";
import { client, live, RECALL_HTTP } from "./live.js";

const FIXTURE = new URL("../../../internal/importer/testdata/coding-session.jsonl", import.meta.url);
const CWD = "/home/dev/src/tally";

/** The fixture under a fresh session id, in a CLAUDE_CONFIG_DIR of its own. */
function localSession() {
  const sessionId = randomUUID();
  const text = readFileSync(FIXTURE, "utf8").replaceAll("7d1c2b9e-3f4a-4c5d-9e8f-0a1b2c3d4e5f", sessionId);
  const config = mkdtempSync(join(tmpdir(), "claude-config-"));
  const dir = join(config, "projects", CWD.replace(/[^a-zA-Z0-9]/g, "-"));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${sessionId}.jsonl`), text);
  process.env.CLAUDE_CONFIG_DIR = config;
  const entries = text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  return { sessionId, entries };
}

test("entries map to Recall's events as recall replay maps them", () => {
  const { sessionId, entries } = localSession();
  const events = entries.map((e) => entryEvent(sessionId, e, undefined)).filter(Boolean);
  assert.ok(events.length > 100, `${events.length} events`);
  for (const e of events) {
    assert.equal(e.id, `${sessionId}-${e.data.uuid}`);
    assert.ok(!("isMeta" in e.data) && !("cwd" in e.data));
  }
  assert.equal(entryEvent(sessionId, { type: "summary", summary: "x" }), null, "lines Recall does not model are not sent");
});

test("the SDK imports a Claude Code session through the store; Recall mirrors it once", live, async (t) => {
  const sdk = await import("@anthropic-ai/claude-agent-sdk");
  const recall = client();
  const { sessionId, entries } = localSession();
  const store = new RecallSessionStore({ url: RECALL_HTTP, store: new sdk.InMemorySessionStore(), onError: (e) => assert.fail(`Recall refused a batch: ${e}`) });
  await sdk.importSessionToStore(sessionId, store, { dir: CWD, batchSize: 40 });
  await sdk.importSessionToStore(sessionId, store, { dir: CWD, batchSize: 40 }); // a replay: stored once
  const wanted = entries.map((e) => entryEvent(sessionId, e, undefined)).filter(Boolean).filter((e) => e.type.endsWith("message"));
  const lines = (await recall.exportSession(sessionId)).filter((l) => l.type === "user" || l.type === "assistant");
  assert.equal(lines.length, wanted.length, "every message entry once in Recall");
  assert.deepEqual(lines.map((l) => l.uuid), wanted.map((e) => e.data.uuid), "in order");
  const loaded = await store.load({ projectKey: CWD.replace(/[^a-zA-Z0-9]/g, "-"), sessionId });
  assert.ok(loaded && loaded.length > 0, "the inner store keeps the entries verbatim");
  const msgs = await sdk.getSessionMessages(sessionId, { sessionStore: store, dir: CWD });
  assert.ok(msgs.length > 0, "getSessionMessages reads through the store");
  // Recall serves the session's memory and compaction from the mirror.
  await recall.extract(sessionId, { timeoutMs: 40_000 });
  const c = await store.compaction(sessionId);
  assert.ok(c.served, `compaction ${c.outcome}: ${c.reason ?? ""}`);
  t.diagnostic(`${lines.length} records mirrored; compaction ${c.outcome}, ${c.tokens_before} → ${c.tokens_after} tokens`);
  await sdk.deleteSession(sessionId, { sessionStore: store, dir: CWD });
  await assert.rejects(recall.exportSession(sessionId), (e) => e.status === 404, "deleted: erased in Recall");
});

test("without an inner store, load answers from Recall's export", live, async () => {
  const sdk = await import("@anthropic-ai/claude-agent-sdk");
  const { sessionId } = localSession();
  const store = new RecallSessionStore({ url: RECALL_HTTP });
  assert.equal(store.listSessions, undefined, "no listing without an inner store");
  await sdk.importSessionToStore(sessionId, store, { dir: CWD });
  const loaded = await store.load({ projectKey: "p", sessionId });
  assert.ok(loaded.length > 100);
  assert.ok(loaded.every((l) => l.sessionId === sessionId && (l.type === "user" || l.type === "assistant" || l.type === "system")));
  assert.equal(await store.load({ projectKey: "p", sessionId: randomUUID() }), null, "never written: null");
});
