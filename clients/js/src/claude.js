// RecallSessionStore: a SessionStore of the Claude Agent SDK (npm
// `@anthropic-ai/claude-agent-sdk`) that mirrors each session into Recall.

import { RecallClient } from "./client.js";
import { NotFound } from "./errors.js";
import * as ev from "./events.js";

const SOURCE = "recall-js/claude-agent-sdk";
const BATCH = 500;
const BLOCK_FIELDS = ["type", "text", "thinking", "signature", "data", "id", "name", "input", "tool_use_id", "content", "is_error", "source"];
const BLOCK_TYPES = new Set(["text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image", "document"]);
const USAGE_FIELDS = ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"];

/**
 * @typedef {{projectKey: string, sessionId: string, subpath?: string}} SessionKey
 * @typedef {{type: string, uuid?: string, timestamp?: string, [k: string]: unknown}} SessionStoreEntry
 * @typedef {{append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void>, load(key: SessionKey): Promise<SessionStoreEntry[] | null>,
 *   listSessions?(projectKey: string): Promise<Array<{sessionId: string, mtime: number}>>, listSessionSummaries?(projectKey: string): Promise<any[]>,
 *   delete?(key: SessionKey): Promise<void>, listSubkeys?(key: {projectKey: string, sessionId: string}): Promise<string[]>}} SessionStore
 * @typedef {object} RecallSessionStoreOptions
 * @property {string} [url] Recall's HTTP edge (default `http://127.0.0.1:8080`)
 * @property {string | null} [token] the tenant's bearer token
 * @property {RecallClient} [client] a client to share (instead of url/token)
 * @property {SessionStore} [store] the store that keeps the entries verbatim (its load answers resumes);
 *   without one, load answers from Recall's export (see the class comment)
 * @property {(err: unknown) => void} [onError] told when Recall refused or missed a batch while `store` kept it
 */

/** @param {any} b a content block as Recall takes it, or null */
function block(b) {
  if (!b || !BLOCK_TYPES.has(b.type)) return null;
  /** @type {Record<string, any>} */
  const out = {};
  for (const f of BLOCK_FIELDS) if (b[f] !== undefined && b[f] !== null) out[f] = b[f];
  if (b.type === "tool_result" && Array.isArray(b.content)) out.content = b.content.map(block).filter(Boolean);
  if (b.type === "text" && !String(b.text ?? "").trim()) return null;
  return out;
}

/**
 * The Recall event of one transcript entry (docs/api.md, the same mapping as
 * `recall replay`: id `<session>-<uuid>`), or null for an entry Recall does not model.
 * @param {string} session @param {SessionStoreEntry} e @param {string | undefined} subpath
 */
export function entryEvent(session, e, subpath) {
  const id = `${session}-${e.uuid}`;
  const time = typeof e.timestamp === "string" ? e.timestamp : undefined;
  if (e.type === "system" && e.subtype === "compact_boundary" && e.uuid) {
    const meta = /** @type {any} */ (e.compactMetadata ?? {});
    return ev.sessionCompacted(session, { id, time, source: SOURCE, trigger: meta.trigger === "manual" ? "manual" : "auto", preTokens: Number(meta.preTokens) || 0 });
  }
  const msg = /** @type {any} */ (e.message);
  if ((e.type !== "user" && e.type !== "assistant") || !e.uuid || !msg || e.isMeta || e.isCompactSummary) return null;
  const content = typeof msg.content === "string" ? (msg.content.trim() ? msg.content : null) : (msg.content ?? []).map(block).filter(Boolean);
  if (!content || content.length === 0) return null;
  const u = msg.usage;
  const usage = u && typeof u === "object" ? Object.fromEntries(USAGE_FIELDS.filter((f) => Number.isInteger(u[f])).map((f) => [f, u[f]])) : undefined;
  const sidechain = e.isSidechain === true || subpath !== undefined;
  return ev.message(session, e.type === "assistant" ? "assistant" : "user", content, {
    id,
    time,
    uuid: e.uuid,
    parentUuid: typeof e.parentUuid === "string" ? e.parentUuid : undefined,
    messageId: e.type === "assistant" && typeof msg.id === "string" ? msg.id : undefined,
    model: typeof msg.model === "string" ? msg.model : undefined,
    stopReason: typeof msg.stop_reason === "string" ? msg.stop_reason : undefined,
    usage: usage && "input_tokens" in usage && "output_tokens" in usage ? usage : undefined,
    querySource: sidechain ? "subagent" : undefined,
    agentId: sidechain ? String(e.agentId ?? subpath ?? "") || undefined : undefined,
    source: SOURCE,
  });
}

/**
 * A SessionStore for the Claude Agent SDK (`query({ options: { sessionStore } })`)
 * that mirrors every session into Recall: its messages as transcript records
 * (event id `<session>-<uuid>`, the uuid the SDK asks stores to treat as an
 * idempotency key, so a retried or re-imported batch is stored once),
 * compaction boundaries as `session.compacted`, subagent transcripts as
 * subagent records. Recall then keeps the session's notes, index and long-term
 * memory, and answers compactions and `@@` references from it.
 *
 * Recall's transcript models messages, not every line of the CLI's JSONL
 * (titles, tags, mode markers, snapshots, fields such as `cwd` or `version`,
 * content blocks it does not model), so it cannot give back entries deep-equal
 * to those appended, which the SessionStore contract asks of `load`. With
 * `store` (any SessionStore: yours, or the SDK's InMemorySessionStore) the
 * entries are kept verbatim there, `load`, `listSessions`, `listSubkeys` and
 * `listSessionSummaries` are its, and Recall is the mirror. Without it,
 * `load` answers from Recall's export — a Claude Code JSONL of the messages
 * and boundaries that `claude --resume` reads, not the exact lines — and
 * subagent transcripts are not loaded. `delete` erases the session in Recall too.
 */
export class RecallSessionStore {
  /** @param {RecallSessionStoreOptions} [opts] */
  constructor(opts = {}) {
    this.client = opts.client ?? new RecallClient({ url: opts.url, token: opts.token });
    this.store = opts.store;
    this.onError = opts.onError ?? (() => {});
    const inner = this.store;
    if (inner?.listSessions) this.listSessions = (/** @type {string} */ p) => /** @type {any} */ (inner).listSessions(p);
    if (inner?.listSessionSummaries) this.listSessionSummaries = (/** @type {string} */ p) => /** @type {any} */ (inner).listSessionSummaries(p);
    if (inner?.listSubkeys) this.listSubkeys = (/** @type {{projectKey: string, sessionId: string}} */ k) => /** @type {any} */ (inner).listSubkeys(k);
  }

  /** @param {SessionKey} key @param {SessionStoreEntry[]} entries */
  async append(key, entries) {
    if (this.store) await this.store.append(key, entries);
    try {
      await this.mirror(key, entries);
    } catch (err) {
      if (!this.store) throw err; // Recall is the only copy: let the SDK retry the batch
      this.onError(err);
    }
  }

  /** Publishes entries' events to Recall, in order. @param {SessionKey} key @param {SessionStoreEntry[]} entries */
  async mirror(key, entries) {
    const events = entries.map((e) => entryEvent(key.sessionId, e, key.subpath)).filter((e) => e !== null);
    for (let i = 0; i < events.length; i += BATCH) {
      const r = await this.client.publish(events.slice(i, i + BATCH));
      if (r.partial) throw new Error(`Recall refused ${r.errors.length} entr(ies) of session ${key.sessionId}: ${JSON.stringify(r.errors[0])}`);
    }
  }

  /** @param {SessionKey} key @returns {Promise<SessionStoreEntry[] | null>} */
  async load(key) {
    if (this.store) return this.store.load(key);
    if (key.subpath !== undefined) return null;
    try {
      const lines = await this.client.exportSession(key.sessionId);
      return lines.length ? /** @type {SessionStoreEntry[]} */ (lines) : null;
    } catch (err) {
      if (err instanceof NotFound) return null;
      throw err;
    }
  }

  /** Deletes the session from `store` and erases it in Recall (the main transcript's key). @param {SessionKey} key */
  async delete(key) {
    if (this.store?.delete) await this.store.delete(key);
    if (key.subpath === undefined) await this.client.eraseSession(key.sessionId);
  }

  /**
   * Recall's compaction of a session (a preview: no model call): when served,
   * `summary` and `kept` are the context to continue from.
   * @param {string} sessionId @param {Record<string, any>} [request]
   */
  compaction(sessionId, request = {}) {
    return this.client.compact(sessionId, { preview: true, ...request });
  }
}
