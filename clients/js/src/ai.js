// Recall for the AI SDK (npm `ai`): a language-model middleware for
// wrapLanguageModel, and a prepareStep helper for generateText / streamText /
// ToolLoopAgent loops. Both record the conversation into Recall and, when the
// prompt is over a threshold, replace it with Recall's compacted context: the
// session's summary as one user message, then the records it does not cover.

import { createHash } from "node:crypto";
import { RecallClient } from "./client.js";
import * as ev from "./events.js";

const SOURCE = "recall-js/ai-sdk";

/**
 * @typedef {Record<string, any>} Msg a ModelMessage or a LanguageModel prompt message
 * @typedef {{type: string, [k: string]: any}} Block
 * @typedef {object} RecallAIOptions
 * @property {string} sessionId the Recall session (A-Z a-z 0-9 - _, at most 128)
 * @property {string} [url] Recall's HTTP edge (default `http://127.0.0.1:8080`)
 * @property {string | null} [token] the tenant's bearer token
 * @property {RecallClient} [client] a client to share (instead of url/token)
 * @property {number} [threshold] compact a prompt estimated above this many tokens (characters / 4; default 100 000)
 * @property {number} [timeoutMs] longest wait for Recall per call before the prompt goes out unchanged (default 5000)
 * @property {(err: unknown) => void} [onError] told when Recall could not help (the call then proceeds unchanged)
 */

/** @param {any} input */
function asObject(input) {
  if (typeof input === "string") {
    try {
      input = JSON.parse(input);
    } catch {
      return { arguments: input };
    }
  }
  return input && typeof input === "object" && !Array.isArray(input) ? input : { value: input ?? null };
}

/** @param {any} output a tool-result output @returns {[string, boolean]} its text and whether it is an error */
function resultOf(output) {
  if (typeof output === "string") return [output, false];
  const v = output?.value;
  const text = typeof v === "string" ? v : Array.isArray(v) && v.every((p) => typeof p?.text === "string") ? v.map((p) => p.text).join("\n") : JSON.stringify(v ?? output?.reason ?? output ?? null);
  return [text, typeof output?.type === "string" && output.type.startsWith("error") ? true : output?.type === "execution-denied"];
}

/** @param {string} s */
const nonEmpty = (s) => (s && s.trim() ? s : "(empty)");

/**
 * A message as Recall records: role and blocks, or null for what Recall does
 * not keep (system messages, reasoning-only turns).
 * @param {Msg} m @returns {{role: "user" | "assistant", content: Block[]} | null}
 */
export function messageBlocks(m) {
  const parts = typeof m.content === "string" ? [{ type: "text", text: m.content }] : Array.isArray(m.content) ? m.content : [];
  /** @type {Block[]} */
  const blocks = [];
  for (const p of parts) {
    if (p.type === "text" && typeof p.text === "string" && p.text.trim()) blocks.push({ type: "text", text: p.text });
    else if (p.type === "tool-call" && m.role === "assistant") blocks.push({ type: "tool_use", id: p.toolCallId, name: p.toolName, input: asObject(p.input) });
    else if (p.type === "tool-result" && m.role === "tool") {
      const [text, isError] = resultOf(p.output);
      blocks.push(isError ? { type: "tool_result", tool_use_id: p.toolCallId, content: nonEmpty(text), is_error: true } : { type: "tool_result", tool_use_id: p.toolCallId, content: nonEmpty(text) });
    } else if (p.type === "file" || p.type === "image") blocks.push({ type: "text", text: `[${p.type}${p.mediaType ? " " + p.mediaType : ""}]` });
  }
  if (!blocks.length || m.role === "system") return null;
  return { role: m.role === "assistant" ? "assistant" : "user", content: blocks };
}

/** @param {any} c Recall content @returns {Block[]} */
const blocksOf = (c) => (typeof c === "string" ? [{ type: "text", text: c }] : Array.isArray(c) ? c : []);

/**
 * The prompt messages of stored records, tagged with their record uuid in
 * `providerOptions.recall` (providers ignore a namespace not theirs).
 * @param {Array<{data: any}>} kept @param {Map<string, Msg>} known messages by record uuid
 * @returns {Msg[]}
 */
function messagesOf(kept, known) {
  /** @type {Map<string, string>} */
  const names = new Map();
  /** @type {Msg[]} */
  const out = [];
  for (const k of kept) {
    const d = k.data ?? {};
    const tag = { recall: { uuid: d.uuid } };
    const blocks = blocksOf(d.content);
    for (const b of blocks) if (b.type === "tool_use") names.set(b.id, b.name);
    const mine = known.get(d.uuid);
    if (mine) {
      out.push({ ...mine, providerOptions: { ...(mine.providerOptions ?? {}), ...tag } });
      continue;
    }
    if (d.role === "assistant") {
      /** @type {any[]} */
      const content = [];
      for (const b of blocks) {
        if (b.type === "text") content.push({ type: "text", text: b.text });
        else if (b.type === "tool_use") content.push({ type: "tool-call", toolCallId: b.id, toolName: b.name, input: b.input ?? {} });
      }
      if (content.length) out.push({ role: "assistant", content, providerOptions: tag });
      continue;
    }
    const results = blocks.filter((b) => b.type === "tool_result");
    if (results.length) {
      const content = results.map((b) => ({
        type: "tool-result",
        toolCallId: b.tool_use_id,
        toolName: names.get(b.tool_use_id) ?? "",
        output: { type: b.is_error ? "error-text" : "text", value: blocksOf(b.content).map((x) => x.text ?? "").join("\n") },
      }));
      out.push({ role: "tool", content, providerOptions: tag });
    }
    const texts = blocks.filter((b) => b.type === "text");
    if (texts.length) out.push({ role: "user", content: texts.map((b) => ({ type: "text", text: b.text })), providerOptions: tag });
  }
  return out;
}

/** @param {Msg[]} msgs */
export const estimateTokens = (msgs) => Math.ceil(JSON.stringify(msgs).length / 4);

/**
 * What the middleware and prepareStep share: recording a conversation into a
 * Recall session (each message once: its record id is derived from the
 * session, the message before it and its content) and compacting it.
 */
export class RecallContext {
  /** @param {RecallAIOptions} opts */
  constructor(opts) {
    if (!opts?.sessionId) throw new TypeError("recall: sessionId is required");
    this.sessionId = opts.sessionId;
    this.client = opts.client ?? new RecallClient({ url: opts.url, token: opts.token });
    this.threshold = opts.threshold ?? 100_000;
    this.timeoutMs = opts.timeoutMs ?? 5000;
    this.onError = opts.onError ?? (() => {});
    /** @type {Set<string>} record uuids stored */
    this.stored = new Set();
    /** @type {Map<string, Msg>} */
    this.known = new Map();
    /** @type {Promise<unknown>} */
    this.queue = Promise.resolve();
    /** The last compaction that replaced a prompt. @type {import("./types.js").CompactReply | null} */
    this.lastCompaction = null;
  }

  /** @param {string | undefined} prev @param {{role: string, content: Block[]}} rec */
  uuidOf(prev, rec) {
    return createHash("sha256").update(`${this.sessionId}\n${prev ?? ""}\n${rec.role}\n${JSON.stringify(rec.content)}`).digest("hex").slice(0, 32);
  }

  /**
   * The records of msgs not stored yet, in order, and the uuid of the last message.
   * @param {Msg[]} msgs
   */
  plan(msgs) {
    /** @type {string | undefined} */
    let prev;
    const fresh = [];
    for (const m of msgs) {
      const tag = m.providerOptions?.recall?.uuid;
      if (typeof tag === "string") {
        prev = tag;
        continue;
      }
      const rec = messageBlocks(m);
      if (!rec) continue;
      const uuid = this.uuidOf(prev, rec);
      this.known.set(uuid, m);
      if (!this.stored.has(uuid)) fresh.push({ uuid, parent: prev, rec });
      prev = uuid;
    }
    return { fresh, last: prev };
  }

  /**
   * Records msgs (those not stored yet); returns the uuid of the last one.
   * Runs after every recording queued before it.
   * @param {Msg[]} msgs @returns {Promise<string | undefined>}
   */
  record(msgs) {
    const run = this.queue.then(async () => {
      const { fresh, last } = this.plan(msgs);
      if (fresh.length) {
        const events = fresh.map((f) => ev.message(this.sessionId, f.rec.role, f.rec.content, { uuid: f.uuid, parentUuid: f.parent, source: SOURCE }));
        const r = await this.client.publish(events, { signal: AbortSignal.timeout(this.timeoutMs) });
        if (r.partial) throw new Error(`Recall refused ${r.errors.length} record(s): ${JSON.stringify(r.errors[0])}`);
        for (const f of fresh) this.stored.add(f.uuid);
      }
      return last;
    });
    this.queue = run.catch(() => {});
    return run;
  }

  /**
   * msgs recorded, and — when estimated over the threshold and Recall serves
   * a compaction — replaced by Recall's context (the system messages first,
   * then the summary and the kept records). Any failure of Recall gives msgs
   * back unchanged (and goes to onError).
   * @param {Msg[]} msgs @returns {Promise<Msg[]>}
   */
  async compact(msgs) {
    try {
      await this.record(msgs);
      if (estimateTokens(msgs) <= this.threshold) return msgs;
      const r = await this.client.compact(this.sessionId, { preview: true, trigger: "auto", context_tokens: estimateTokens(msgs) }, { signal: AbortSignal.timeout(this.timeoutMs) });
      if (!r.served || !r.summary) return msgs;
      this.lastCompaction = r;
      const summary = { role: "user", content: blocksOf(r.summary.content).map((b) => ({ type: "text", text: b.text ?? "" })), providerOptions: { recall: { uuid: r.summary.uuid, summary: true } } };
      return [...msgs.filter((m) => m.role === "system"), summary, ...messagesOf(r.kept ?? [], this.known)];
    } catch (err) {
      this.onError(err);
      return msgs;
    }
  }

  /**
   * Records a model's response (its content parts: text, tool-call) after the prompt `last` ended with.
   * @param {string | undefined} last @param {any[]} content
   */
  recordResponse(last, content) {
    const m = { role: "assistant", content: content.filter((p) => p.type === "text" || p.type === "tool-call") };
    const tagged = last ? [{ role: "user", content: [], providerOptions: { recall: { uuid: last } } }, m] : [m];
    return this.record(tagged).catch((err) => this.onError(err));
  }
}

/**
 * A LanguageModel middleware (`wrapLanguageModel({ model, middleware })`):
 * each call's prompt is recorded into Recall before the call, its result after
 * it (in the background: a stream is passed on as it arrives), and a prompt
 * estimated over `threshold` tokens is replaced by Recall's compacted context.
 * No model is called for it. When Recall cannot help the call goes out unchanged.
 * @param {RecallAIOptions} opts
 */
export function recallMiddleware(opts) {
  const ctx = new RecallContext(opts);
  return {
    specificationVersion: /** @type {const} */ ("v4"),
    recall: ctx,
    /** @param {{params: any}} o */
    async transformParams({ params }) {
      const prompt = await ctx.compact(params.prompt);
      return prompt === params.prompt ? params : { ...params, prompt };
    },
    /** @param {{doGenerate: () => PromiseLike<any>, params: any}} o */
    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      ctx.recordResponse(lastUuid(params.prompt), result.content ?? []);
      return result;
    },
    /** @param {{doStream: () => PromiseLike<any>, params: any}} o */
    async wrapStream({ doStream, params }) {
      const { stream, ...rest } = await doStream();
      /** @type {Map<string, string>} */
      const texts = new Map();
      /** @type {any[]} */
      const content = [];
      const collect = new TransformStream({
        transform(part, controller) {
          controller.enqueue(part);
          if (part.type === "text-delta") {
            if (!texts.has(part.id)) content.push({ type: "text", id: part.id });
            texts.set(part.id, (texts.get(part.id) ?? "") + (part.delta ?? ""));
          } else if (part.type === "tool-call") content.push(part);
        },
        flush() {
          const parts = content.map((p) => (p.type === "text" ? { type: "text", text: texts.get(p.id) ?? "" } : p));
          ctx.recordResponse(lastUuid(params.prompt), parts);
        },
      });
      return { stream: stream.pipeThrough(collect), ...rest };
    },
  };

  /** @param {Msg[]} prompt the uuid of the prompt's last recorded message */
  function lastUuid(prompt) {
    return ctx.plan(prompt.filter((m) => !m.providerOptions?.recall?.summary)).last;
  }
}

/**
 * A `prepareStep` for generateText / streamText / ToolLoopAgent: records the
 * step's messages and, over `threshold`, returns Recall's compacted context
 * as the step's messages (which the SDK carries forward to later steps).
 * @param {RecallAIOptions} opts
 * @returns {((o: {messages: Msg[]}) => Promise<{messages?: Msg[]}>) & {recall: RecallContext}}
 */
export function recallPrepareStep(opts) {
  const ctx = new RecallContext(opts);
  /** @param {{messages: Msg[]}} o */
  const prepare = async ({ messages }) => {
    const out = await ctx.compact(messages);
    return out === messages ? {} : { messages: out };
  };
  return Object.assign(prepare, { recall: ctx });
}
