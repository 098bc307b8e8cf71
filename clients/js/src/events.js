// Builders of the CloudEvents a platform publishes (docs/api.md, "Event
// types"), made with the official `cloudevents` package. Ids are fixed when an
// event is built, so publishing the same event again (a retry) is stored once:
// a message's id is `<session>-<uuid>` (its record's uuid), other events get a
// random uuid unless you pass `id`.

import { CloudEvent } from "cloudevents";
import { randomUUID } from "node:crypto";

export const MESSAGE = "dev.recall.transcript.message";
export const SESSION_STARTED = "dev.recall.session.started";
export const SESSION_ENDED = "dev.recall.session.ended";
export const SESSION_COMPACTING = "dev.recall.session.compacting";
export const SESSION_COMPACTED = "dev.recall.session.compacted";
export const DEFAULT_SOURCE = "recall-client-js";

/**
 * @typedef {{type: string, [k: string]: any}} Block
 *   a content block in Anthropic Messages shape: text, thinking, tool_use
 *   (`id`, `name`, `input`), tool_result (`tool_use_id`, `content`, `is_error`), image, document
 * @typedef {{id?: string, source?: string, time?: string | null, extensions?: Record<string, string>}} EventOptions
 *   `time` defaults to now; `null` leaves it out. `extensions` are CloudEvents
 *   extension attributes (lowercase letters and digits, at most 20).
 * @typedef {EventOptions & {uuid?: string, parentUuid?: string, messageId?: string, model?: string,
 *   stopReason?: string, usage?: Record<string, number>, querySource?: string, agentId?: string, peerId?: string}} MessageOptions
 */

/** @param {Record<string, any>} d */
function dropUndefined(d) {
  return Object.fromEntries(Object.entries(d).filter(([, v]) => v !== undefined && v !== null));
}

/**
 * A structured CloudEvent of any of the five platform types.
 * @param {string} session
 * @param {string} type
 * @param {Record<string, any>} data
 * @param {EventOptions} [opts]
 * @returns {CloudEvent<any>}
 */
export function event(session, type, data, opts = {}) {
  /** @type {Record<string, any>} */
  const attrs = {
    specversion: "1.0",
    id: opts.id ?? randomUUID(),
    source: opts.source ?? DEFAULT_SOURCE,
    type,
    subject: session,
    datacontenttype: "application/json",
    ...(opts.extensions ?? {}),
    data,
  };
  if (opts.time !== null) attrs.time = opts.time ?? new Date().toISOString();
  return new CloudEvent(attrs);
}

/**
 * A `dev.recall.transcript.message`: one user or assistant record.
 * @param {string} session
 * @param {"user" | "assistant"} role
 * @param {string | Block[]} content a string or Anthropic Messages blocks ({@link text}, {@link toolUse}, {@link toolResult})
 * @param {MessageOptions} [opts]
 */
export function message(session, role, content, opts = {}) {
  if (role !== "user" && role !== "assistant") throw new TypeError(`role must be "user" or "assistant", not ${JSON.stringify(role)}`);
  const uuid = opts.uuid ?? randomUUID();
  const data = dropUndefined({
    uuid,
    parent_uuid: opts.parentUuid,
    role,
    content,
    message_id: opts.messageId,
    model: opts.model,
    stop_reason: opts.stopReason,
    usage: opts.usage,
    query_source: opts.querySource,
    agent_id: opts.agentId,
    peer_id: opts.peerId,
  });
  return event(session, MESSAGE, data, { ...opts, id: opts.id ?? `${session}-${uuid}` });
}

/**
 * A `dev.recall.session.started`: who owns the session and what memory it may write.
 * @param {string} session
 * @param {{userId?: string, parentSession?: string, cwd?: string, ephemeral?: boolean, agentId?: string,
 *   model?: string, memoryPolicy?: Record<string, any>} & EventOptions} [opts]
 */
export function sessionStarted(session, opts = {}) {
  const data = dropUndefined({
    parent_session: opts.parentSession,
    cwd: opts.cwd,
    ephemeral: opts.ephemeral,
    user_id: opts.userId,
    agent_id: opts.agentId,
    model: opts.model,
    memory_policy: opts.memoryPolicy,
  });
  return event(session, SESSION_STARTED, data, opts);
}

/** A `dev.recall.session.ended`. @param {string} session @param {string} [reason] @param {EventOptions} [opts] */
export function sessionEnded(session, reason = "user_exit", opts = {}) {
  return event(session, SESSION_ENDED, { reason }, opts);
}

/** A `dev.recall.session.compacting`. @param {string} session @param {string} [trigger] @param {EventOptions} [opts] */
export function sessionCompacting(session, trigger = "auto", opts = {}) {
  return event(session, SESSION_COMPACTING, { trigger }, opts);
}

/**
 * A `dev.recall.session.compacted`: the platform replaced its context.
 * @param {string} session
 * @param {{trigger?: string, preTokens?: number, postTokens?: number, firstKeptUuid?: string, lastKeptUuid?: string} & EventOptions} [opts]
 */
export function sessionCompacted(session, opts = {}) {
  const data = dropUndefined({
    trigger: opts.trigger ?? "auto",
    pre_tokens: opts.preTokens ?? 0,
    post_tokens: opts.postTokens ?? 0,
    first_kept_uuid: opts.firstKeptUuid,
    last_kept_uuid: opts.lastKeptUuid,
  });
  return event(session, SESSION_COMPACTED, data, opts);
}

/** @param {string} value @returns {Block} */
export const text = (value) => ({ type: "text", text: value });
/** @param {string} id @param {string} name @param {Record<string, any>} input @returns {Block} */
export const toolUse = (id, name, input) => ({ type: "tool_use", id, name, input });
/** @param {string} toolUseId @param {string | Block[]} content @param {boolean} [isError] @returns {Block} */
export const toolResult = (toolUseId, content, isError = false) =>
  isError ? { type: "tool_result", tool_use_id: toolUseId, content, is_error: true } : { type: "tool_result", tool_use_id: toolUseId, content };
