// RecallSession: a Session of the OpenAI Agents SDK (npm `@openai/agents`)
// kept in Recall. Items are the session's transcript records; the history the
// agent continues with is Recall's compacted context once Recall's notes cover
// part of the conversation.

import { randomUUID } from "node:crypto";
import { RecallClient } from "./client.js";
import { NotFound, RecallError } from "./errors.js";
import * as ev from "./events.js";
import { ITEM_EXT, OP_EXT, blocksOf, callIdOf, fromRecord, isCall, pairToolItems, skeletonOf, toRecord } from "./items.js";

const SOURCE = "recall-js/openai-agents";
const BATCH = 500;

/**
 * @typedef {Record<string, any>} Item an item, as this module reads it
 * @typedef {import("@openai/agents").AgentInputItem} AgentInputItem
 * @typedef {object} RecallSessionOptions
 * @property {string} sessionId the SDK's session id; Recall's session id too (A-Z a-z 0-9 - _, at most 128)
 * @property {string} [url] Recall's HTTP edge (default `http://127.0.0.1:8080`)
 * @property {string | null} [token] the tenant's bearer token
 * @property {RecallClient} [client] a client to share (instead of url/token)
 * @property {string} [recallSessionId] the Recall session holding the items (default sessionId; see clearSession)
 * @property {boolean} [compaction] serve Recall's compacted context from getItems (default true)
 * @property {number} [threshold] the agent's auto-compact threshold in tokens (Recall's `auto_compact_threshold`)
 * @property {number} [compactTimeoutMs] longest wait for Recall's compaction in getItems before serving the
 *   full history instead (default 3000)
 * @property {{userId?: string, agentId?: string, model?: string, parentSession?: string}} [started]
 *   published once as the session's `session.started` (owner and agent: long-term memory)
 * @property {(err: unknown) => void} [onError] told about background failures (a forced extraction)
 */

/**
 * A Session of the OpenAI Agents SDK in Recall, compaction-aware (it has
 * `runCompaction`, which never calls a model and never blocks).
 *
 * - `addItems` publishes each item as one transcript record, in order, in
 *   batches, and resolves once Recall stored them all. Each item object gets
 *   one record id for good: a publish the client retries, or an `addItems`
 *   the caller repeats with the same item objects after an error, stores every
 *   record once (Recall drops a known event id).
 * - `getItems` asks Recall for a preview compaction (a KV read and a bounded
 *   transcript read, no model): when served, the history is Recall's summary
 *   as one user message followed by the records after it; otherwise (no notes
 *   yet, no reduction, Recall slow or down) the whole history. Tool calls and
 *   outputs always come in pairs: an unanswered call and an output whose call
 *   is not in the history are left out.
 * - `popItem` removes the newest item and records the removal as a control
 *   record (`agentsop: pop:<uuid>`, a user message saying what was withdrawn,
 *   so Recall's notes see it); every read leaves both out.
 * - `clearSession` erases the Recall session (every record, the notes) and
 *   continues under a fresh Recall session id (`recallSessionId`), since Recall
 *   refuses events of an erased session for a day.
 *
 * Calls on one session run one after another; a RecallSession is safe to
 * share between concurrent runs of one conversation.
 */
export class RecallSession {
  /** @param {RecallSessionOptions} opts */
  constructor(opts) {
    if (!opts?.sessionId) throw new TypeError("RecallSession: sessionId is required");
    this.sessionId = opts.sessionId;
    this.recallSessionId = opts.recallSessionId ?? opts.sessionId;
    this.client = opts.client ?? new RecallClient({ url: opts.url, token: opts.token });
    this.compaction = opts.compaction ?? true;
    this.threshold = opts.threshold;
    this.compactTimeoutMs = opts.compactTimeoutMs ?? 3000;
    this.started = opts.started;
    this.onError = opts.onError ?? (() => {});
    /** @type {Array<{uuid: string, item: Item}>} the history, in order */
    this.records = [];
    /** @type {WeakMap<object, string>} */
    this.ids = new WeakMap();
    /** The last compaction served by getItems (null: the whole history was served). @type {import("./types.js").CompactReply | null} */
    this.lastCompaction = null;
    this.loaded = false;
    this.announced = false;
    /** @type {Promise<unknown>} */
    this.queue = Promise.resolve();
  }

  /** @returns {Promise<string>} */
  async getSessionId() {
    return this.sessionId;
  }

  /** @template T @param {() => Promise<T>} fn @returns {Promise<T>} */
  serial(fn) {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  /**
   * The history to continue with, oldest first; with `limit`, the newest
   * `limit` items (then pairs cut by the limit are left out too).
   * @param {number} [limit] @returns {Promise<AgentInputItem[]>}
   */
  getItems(limit) {
    return this.serial(async () => {
      await this.load();
      let items = this.records.map((r) => r.item);
      this.lastCompaction = null;
      if (this.compaction && this.records.length > 0) {
        const served = await this.compacted();
        if (served) items = served;
      }
      if (limit !== undefined && limit !== null && limit >= 0) items = items.slice(Math.max(0, items.length - limit));
      return /** @type {any} */ (structuredClone(pairToolItems(items)));
    });
  }

  /** Recall's compacted history, or null when none is served. @returns {Promise<Item[] | null>} */
  async compacted() {
    /** @type {Record<string, any>} */
    const req = { preview: true, trigger: "auto", wait_timeout_ms: 0 };
    if (this.threshold) req.auto_compact_threshold = this.threshold;
    let r;
    try {
      r = await this.client.compact(this.recallSessionId, req, { signal: AbortSignal.timeout(this.compactTimeoutMs) });
    } catch (err) {
      this.onError(err);
      return null; // fail open: the whole history
    }
    if (!r.served || !r.summary) return null;
    this.lastCompaction = r;
    const mine = new Map(this.records.map((x) => [x.uuid, x.item]));
    const summary = { role: "user", content: blocksOf(r.summary.content).map((b) => b.text ?? "").join("\n") };
    return [summary, ...recordsOf(r.kept ?? [], mine).map((x) => x.item)];
  }

  /** Reads the history from Recall once, when this session has none yet. */
  async load() {
    if (this.loaded) return;
    /** @type {Array<Record<string, any>>} */
    let lines = [];
    try {
      lines = await this.client.exportSession(this.recallSessionId);
    } catch (err) {
      if (!(err instanceof NotFound)) throw err;
    }
    const recs = lines
      .filter((l) => (l.type === "user" || l.type === "assistant") && l.message)
      .map((l) => ({ data: { uuid: l.uuid, role: l.message.role, content: l.message.content } }));
    // The export carries no extensions: these items are inferred from the blocks.
    this.records = recordsOf(recs, new Map());
    this.loaded = true;
  }

  /**
   * Publishes items as transcript records, in order; resolves once all are
   * stored. Throws a RecallError when Recall refused some (nothing is added
   * to the history then; repeating the call with the same items stores each once).
   * @param {AgentInputItem[]} items
   */
  addItems(items) {
    return this.serial(async () => {
      if (!items?.length) return;
      await this.load();
      const added = items.map((item) => ({ uuid: this.idOf(item), item: /** @type {Item} */ (structuredClone(item)) }));
      let parent = this.records.at(-1)?.uuid;
      const events = [];
      if (this.started && !this.announced) {
        events.push(ev.sessionStarted(this.recallSessionId, { ...this.started, id: `${this.recallSessionId}-started`, source: SOURCE }));
      }
      for (const a of added) {
        events.push(recordEvent(this.recallSessionId, a.uuid, parent, a.item));
        parent = a.uuid;
      }
      await this.publish(events);
      this.announced = true;
      this.records.push(...added);
    });
  }

  /** @param {object} item */
  idOf(item) {
    let id = this.ids.get(item);
    if (!id) this.ids.set(item, (id = randomUUID()));
    return id;
  }

  /** @param {any[]} events */
  async publish(events) {
    for (let i = 0; i < events.length; i += BATCH) {
      const r = await this.client.publish(events.slice(i, i + BATCH));
      if (r.partial) {
        const e = r.errors[0] ?? {};
        throw new RecallError(`Recall refused ${r.errors.length} record(s) of this session, e.g. ${e.id}: ${e.field ?? ""} ${e.error ?? ""}`, { status: 207, problem: /** @type {any} */ (r) });
      }
    }
  }

  /** Removes and returns the newest item (undefined when there is none). @returns {Promise<AgentInputItem | undefined>} */
  popItem() {
    return this.serial(async () => {
      await this.load();
      const last = this.records.at(-1);
      if (!last) return undefined;
      const what = isCall(last.item) ? `the tool call ${callIdOf(last.item)}` : `record ${last.uuid}`;
      const marker = ev.message(this.recallSessionId, "user", [ev.text(`[Withdrawn: the agent removed ${what} from this conversation; it is not part of it.]`)], {
        uuid: `${last.uuid}-pop`,
        parentUuid: last.uuid,
        source: SOURCE,
        extensions: { [OP_EXT]: `pop:${last.uuid}` },
      });
      await this.publish([marker]);
      this.records.pop();
      return /** @type {any} */ (structuredClone(last.item));
    });
  }

  /**
   * Erases the Recall session and starts an empty one: the next records go to
   * a new Recall session id (`recallSessionId`; pass it to a later
   * RecallSession to continue there).
   */
  clearSession() {
    return this.serial(async () => {
      await this.client.eraseSession(this.recallSessionId);
      this.recallSessionId = `${this.sessionId.slice(0, 100)}-c${Date.now().toString(36)}${randomUUID().slice(0, 4)}`;
      this.records = [];
      this.ids = new WeakMap();
      this.loaded = true;
      this.announced = false;
      this.lastCompaction = null;
    });
  }

  /**
   * The SDK's compaction hook, run after each turn is stored. Recall compacts
   * continuously (its extractor keeps the notes current in the background), so
   * this returns at once without calling a model; with `force` it also asks
   * Recall for an extraction in the background (errors go to onError).
   * @param {{force?: boolean}} [args] @returns {null}
   */
  runCompaction(args) {
    if (args?.force) this.client.extract(this.recallSessionId).catch((err) => this.onError(err));
    return null;
  }
}

/** @param {any} content */
function isControlText(content) {
  const t = blocksOf(content)[0]?.text;
  return typeof t === "string" && t.startsWith("[Withdrawn: the agent removed ");
}

/**
 * The transcript event of one item.
 * @param {string} session @param {string} uuid @param {string | undefined} parent @param {Item} item
 */
function recordEvent(session, uuid, parent, item) {
  const rec = toRecord(item);
  const skel = skeletonOf(item, rec.content);
  return ev.message(session, rec.role, rec.content, {
    uuid,
    parentUuid: parent,
    stopReason: rec.stopReason,
    source: SOURCE,
    extensions: skel === undefined ? {} : { [ITEM_EXT]: skel },
  });
}

/**
 * Items of stored records (kept events or exported lines), in order: control
 * records and the items they withdraw left out; `mine` supplies the exact item
 * of a record this process added whose skeleton did not travel.
 * @param {Array<{data: any, [ext: string]: any}>} recs @param {Map<string, Item>} mine
 * @returns {Array<{uuid: string, item: Item}>}
 */
function recordsOf(recs, mine) {
  const popped = new Set();
  for (const r of recs) {
    const op = r[OP_EXT];
    if (typeof op === "string" && op.startsWith("pop:")) popped.add(op.slice(4));
    else if (isControlText(r.data?.content)) popped.add(String(r.data?.uuid ?? "").replace(/-pop$/, ""));
  }
  /** @type {Map<string, string>} */
  const names = new Map();
  const out = [];
  for (const r of recs) {
    const d = r.data ?? {};
    if (popped.has(d.uuid) || r[OP_EXT] || isControlText(d.content)) continue;
    const blocks = blocksOf(d.content);
    const item = r[ITEM_EXT] !== undefined ? fromRecord(blocks, r[ITEM_EXT]) : mine.get(d.uuid) ?? fromRecord(blocks, undefined, { role: d.role, names });
    if (isCall(item) && item.name) names.set(/** @type {string} */ (callIdOf(item)), item.name);
    out.push({ uuid: String(d.uuid), item });
  }
  return out;
}
