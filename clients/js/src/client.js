// RecallClient: the HTTP edge of Recall (docs/api.md, "HTTP edge"), with the
// verbs and error mapping of the Python client (clients/python).

import { CloudEvent, HTTP } from "cloudevents";
import { RecallError, TransportError, fromResponse } from "./errors.js";

const STRUCTURED = "application/cloudevents+json";
const BATCH = "application/cloudevents-batch+json";
const JSON_TYPE = "application/json";
const RETRYABLE = new Set([429, 502, 503, 504]);

/**
 * @typedef {import("./types.js").PublishResult} PublishResult
 * @typedef {import("./types.js").CompactReply} CompactReply
 * @typedef {import("./types.js").EditReply} EditReply
 * @typedef {import("./types.js").ExtractResult} ExtractResult
 * @typedef {import("./types.js").MemoryReply} MemoryReply
 * @typedef {import("./types.js").SessionsPage} SessionsPage
 * @typedef {import("./types.js").IndexReply} IndexReply
 * @typedef {import("./types.js").ResolveReply} ResolveReply
 * @typedef {import("./types.js").QueryReply} QueryReply
 * @typedef {import("./types.js").CommitReply} CommitReply
 * @typedef {import("./types.js").UserMemory} UserMemory
 * @typedef {import("./types.js").ConfigReply} ConfigReply
 * @typedef {import("./types.js").EraseReceipt} EraseReceipt
 *
 * @typedef {object} ClientOptions
 * @property {string} [url] the HTTP edge (default `http://127.0.0.1:8080`, `recall up`)
 * @property {string | null} [token] the tenant's bearer token (none in open mode)
 * @property {number} [timeoutMs] deadline of one attempt (default 30 000); must be shorter than `retryForMs`
 * @property {number} [retryForMs] how long a request is retried (default 90 000; 0: never retried).
 *   Retried: no answer (refused, reset, the attempt's deadline), 429, 502, 503 and 504, after
 *   `Retry-After` when the reply has one, else 250 ms doubling to 5 s, with jitter.
 * @property {Record<string, string>} [headers] extra headers on every request
 * @property {typeof fetch} [fetch] the fetch to use (default the global one)
 *
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] cancels the call and its retries
 * @property {number} [timeoutMs] this call's attempt deadline
 * @property {Record<string, string | number | boolean | undefined | null>} [query]
 * @property {Record<string, string>} [headers]
 */

/** @param {number} ms @param {AbortSignal | undefined} signal */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), reject(signal.reason)), { once: true });
  });
}

/** @param {string} s */
const seg = (s) => {
  if (typeof s !== "string" || s === "") throw new TypeError(`a session or user id is required, got ${JSON.stringify(s)}`);
  return encodeURIComponent(s);
};

/**
 * A client of Recall's HTTP edge. Every method returns the decoded JSON reply
 * (typed in types.js) or throws a {@link RecallError} subclass chosen by status
 * (BadRequest, NotFound, Gone, TooLarge, TooManyRequests, Unavailable, …;
 * TransportError when nothing answered). A retried request is resent as it
 * was: events keep their ids, so Recall stores them once (docs/api.md,
 * "Deduplication"). Safe for concurrent use.
 */
export class RecallClient {
  /** @param {ClientOptions} [opts] */
  constructor(opts = {}) {
    this.url = (opts.url ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
    this.token = opts.token ?? null;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.retryForMs = opts.retryForMs ?? 90_000;
    if (this.retryForMs > 0 && this.timeoutMs >= this.retryForMs) {
      throw new RangeError(`timeoutMs (${this.timeoutMs}) must be shorter than retryForMs (${this.retryForMs}), so that a lost reply can be retried`);
    }
    this.headers = { ...(opts.headers ?? {}) };
    this.fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /**
   * One API call with retries: returns `{status, headers, body}` (body decoded
   * when JSON, else text); throws a RecallError for an error status.
   * @param {string} method
   * @param {string} path
   * @param {{body?: string, contentType?: string} & CallOptions} [opts]
   * @returns {Promise<{status: number, headers: Headers, body: any}>}
   */
  async request(method, path, opts = {}) {
    const url = this.url + path + queryString(opts.query);
    /** @type {Record<string, string>} */
    const headers = { accept: "application/json, application/problem+json", ...this.headers, ...(opts.headers ?? {}) };
    if (opts.body !== undefined) headers["content-type"] = opts.contentType ?? JSON_TYPE;
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const what = `${method} ${path}`;
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const until = Date.now() + Math.max(this.retryForMs, 0);
    for (let attempt = 0; ; attempt++) {
      const left = until - Date.now();
      const deadline = this.retryForMs > 0 ? Math.max(1, Math.min(timeoutMs, left)) : timeoutMs;
      try {
        return await this.#once(what, url, { method, headers, body: opts.body }, deadline, opts.signal);
      } catch (err) {
        const wait = retryDelay(err, attempt);
        if (wait === null || opts.signal?.aborted || Date.now() + wait >= until) throw err;
        await sleep(wait, opts.signal);
      }
    }
  }

  /**
   * @param {string} what @param {string} url @param {RequestInit} init
   * @param {number} deadline @param {AbortSignal | undefined} signal
   */
  async #once(what, url, init, deadline, signal) {
    const timeout = AbortSignal.timeout(deadline);
    const sig = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let res, text;
    try {
      res = await this.fetch(url, { ...init, signal: sig });
      text = await res.text();
    } catch (err) {
      if (signal?.aborted) throw err;
      const why = timeout.aborted ? `no answer within ${deadline} ms` : String(/** @type {any} */ (err)?.cause?.code ?? err);
      throw new TransportError(`${what}: ${why}`, { cause: err });
    }
    if (res.status >= 400) throw fromResponse(res.status, res.headers, text, what);
    const ctype = res.headers.get("content-type") ?? "";
    if (!ctype.includes("json") || ctype.includes("ndjson")) return { status: res.status, headers: res.headers, body: text };
    try {
      return { status: res.status, headers: res.headers, body: text.trim() ? JSON.parse(text) : null };
    } catch (err) {
      throw new RecallError(`${what}: the reply is not JSON`, { status: res.status, body: text, cause: err });
    }
  }

  /**
   * @param {string} method @param {string} path @param {any} [body] @param {CallOptions} [opts]
   * @returns {Promise<any>}
   */
  async json(method, path, body, opts = {}) {
    const r = await this.request(method, path, { ...opts, body: body === undefined ? undefined : JSON.stringify(body) });
    return r.body ?? {};
  }

  /** True when `GET /readyz` answers 200. @param {CallOptions} [opts] */
  async ready(opts = {}) {
    try {
      await this.request("GET", "/readyz", { ...opts, timeoutMs: opts.timeoutMs ?? 2000 });
      return true;
    } catch (err) {
      if (err instanceof RecallError) return false;
      throw err;
    }
  }

  /**
   * Publish one event (structured mode) or several (batch mode): `POST /v1/events`.
   * Events are CloudEvents (see events.js) or plain objects with the same
   * attributes. Resolves when every stored event was acknowledged by JetStream;
   * a 207 (some stored, some rejected) resolves with `partial` true and `errors`.
   * When nothing was stored it throws (BadRequest, TooLarge, Gone, …) and the
   * error's `errors`/`results` say which event failed and why.
   * @param {CloudEvent<any> | Record<string, any> | Array<CloudEvent<any> | Record<string, any>>} events
   * @param {CallOptions} [opts]
   * @returns {Promise<PublishResult>}
   */
  async publish(events, opts = {}) {
    const list = Array.isArray(events) ? events.map(asEvent) : [asEvent(events)];
    if (list.length === 0) throw new TypeError("publish: an empty batch");
    const body = Array.isArray(events) ? JSON.stringify(list) : String(HTTP.structured(list[0]).body);
    const contentType = Array.isArray(events) ? BATCH : STRUCTURED;
    const r = await this.request("POST", "/v1/events", { ...opts, body, contentType });
    const b = r.body && typeof r.body === "object" ? r.body : {};
    if (r.status === 207) {
      return /** @type {PublishResult} */ ({ ...b, status: 207, partial: true, errors: b.errors ?? [], results: b.results ?? [] });
    }
    return { ...b, status: r.status, partial: false, errors: [] };
  }

  /**
   * `POST /v1/sessions/{session}/compact`: the session's compacted context (docs/compaction.md).
   * No model is called on the served path; `preview: true` never calls one.
   * @param {string} session @param {Record<string, any>} [request] @param {CallOptions} [opts]
   * @returns {Promise<CompactReply>}
   */
  compact(session, request = {}, opts = {}) {
    return this.json("POST", `/v1/sessions/${seg(session)}/compact`, request, opts);
  }

  /**
   * `POST /v1/sessions/{session}/edit`: which tool results and thinking blocks to clear.
   * @param {string} session @param {Record<string, any>} [request] @param {CallOptions} [opts]
   * @returns {Promise<EditReply>}
   */
  edit(session, request = {}, opts = {}) {
    return this.json("POST", `/v1/sessions/${seg(session)}/edit`, request, opts);
  }

  /**
   * `POST /v1/sessions/{session}/extract`: a manual extraction, answered when
   * committed. Unprocessable (422) for a session without messages.
   * @param {string} session @param {{timeoutMs?: number} & CallOptions} [opts]
   * @returns {Promise<ExtractResult>}
   */
  extract(session, opts = {}) {
    const body = opts.timeoutMs ? { timeout_ms: opts.timeoutMs } : {};
    const attempt = opts.timeoutMs ? opts.timeoutMs + 5000 : Math.max(this.timeoutMs, 35_000);
    return this.json("POST", `/v1/sessions/${seg(session)}/extract`, body, { ...opts, timeoutMs: attempt });
  }

  /**
   * `GET /v1/sessions/{session}/memory`: the notes; NotFound before the first extraction.
   * @param {string} session @param {CallOptions} [opts] @returns {Promise<MemoryReply>}
   */
  memory(session, opts = {}) {
    return this.json("GET", `/v1/sessions/${seg(session)}/memory`, undefined, opts);
  }

  /**
   * `GET /v1/sessions`: one page of index entries; `next` is the following page's cursor.
   * @param {{q?: string, tag?: string, limit?: number, cursor?: string}} [filter] @param {CallOptions} [opts]
   * @returns {Promise<SessionsPage>}
   */
  listSessions(filter = {}, opts = {}) {
    return this.json("GET", "/v1/sessions", undefined, { ...opts, query: { ...filter } });
  }

  /**
   * Every matching session, following the cursors.
   * @param {{q?: string, tag?: string, pageSize?: number}} [filter] @param {CallOptions} [opts]
   */
  async *iterSessions(filter = {}, opts = {}) {
    let cursor;
    for (;;) {
      const page = await this.listSessions({ q: filter.q, tag: filter.tag, limit: filter.pageSize, cursor }, opts);
      yield* page.sessions ?? [];
      if (!page.next || !page.sessions?.length) return;
      cursor = page.next;
    }
  }

  /** `GET /v1/sessions/{session}/index`. @param {string} session @param {CallOptions} [opts] @returns {Promise<IndexReply>} */
  getSession(session, opts = {}) {
    return this.json("GET", `/v1/sessions/${seg(session)}/index`, undefined, opts);
  }

  /** `POST /v1/sessions/{session}/index`: index now. @param {string} session @param {CallOptions} [opts] @returns {Promise<IndexReply>} */
  index(session, opts = {}) {
    return this.json("POST", `/v1/sessions/${seg(session)}/index`, undefined, opts);
  }

  /**
   * Resolve a session reference (`"name"`, `"name~1"`, an id), or the `@@name`
   * references in `text` (with `answer`, each reference's question is answered).
   * `context` is a message to add to a prompt.
   * @param {string | {ref?: string, text?: string, answer?: boolean}} what @param {CallOptions} [opts]
   * @returns {Promise<ResolveReply>}
   */
  resolve(what, opts = {}) {
    if (typeof what === "string") {
      if (!what) throw new TypeError("resolve: give a reference or {text}");
      return this.json("GET", "/v1/resolve", undefined, { ...opts, query: { ref: what } });
    }
    return this.json("POST", "/v1/resolve", what, opts);
  }

  /**
   * `POST /v1/sessions/{session}/query`: answer a question from a session (an id or a name).
   * @param {string} session @param {string} question @param {{budgetTokens?: number} & CallOptions} [opts]
   * @returns {Promise<QueryReply>}
   */
  query(session, question, opts = {}) {
    const body = opts.budgetTokens ? { question, budget_tokens: opts.budgetTokens } : { question };
    return this.json("POST", `/v1/sessions/${seg(session)}/query`, body, opts);
  }

  /** `POST /v1/sessions/{session}/commit`: write long-term memory now. @param {string} session @param {CallOptions} [opts] @returns {Promise<CommitReply>} */
  commit(session, opts = {}) {
    return this.json("POST", `/v1/sessions/${seg(session)}/commit`, undefined, opts);
  }

  /**
   * `GET /v1/users/{user}/memory`: the user's long-term memory and a prompt `context`.
   * @param {string} user @param {{types?: string[]} & CallOptions} [opts] @returns {Promise<UserMemory>}
   */
  userMemory(user, opts = {}) {
    return this.json("GET", `/v1/users/${seg(user)}/memory`, undefined, { ...opts, query: { types: opts.types?.join(",") } });
  }

  /** `GET /v1/config`: the tenant's configuration. @param {{tenant?: string} & CallOptions} [opts] @returns {Promise<ConfigReply>} */
  getConfig(opts = {}) {
    return this.json("GET", "/v1/config", undefined, { ...opts, query: { tenant: opts.tenant } });
  }

  /**
   * `PUT /v1/config` (replace) or, with `merge`, `PATCH /v1/config` (a JSON merge
   * patch: `null` removes a field). `ifMatch` is a revision: PreconditionFailed
   * (412) when it is no longer the stored one; Unprocessable (422) lists invalid fields.
   * @param {Record<string, any>} config
   * @param {{merge?: boolean, ifMatch?: number | "*", tenant?: string} & CallOptions} [opts]
   * @returns {Promise<ConfigReply>}
   */
  setConfig(config, opts = {}) {
    const headers = opts.ifMatch === undefined ? opts.headers : { ...opts.headers, "if-match": opts.ifMatch === "*" ? "*" : `"${opts.ifMatch}"` };
    return this.json(opts.merge ? "PATCH" : "PUT", "/v1/config", config, { ...opts, headers, query: { tenant: opts.tenant } });
  }

  /** `GET /v1/config/history`. @param {{tenant?: string} & CallOptions} [opts] */
  configHistory(opts = {}) {
    return this.json("GET", "/v1/config/history", undefined, { ...opts, query: { tenant: opts.tenant } });
  }

  /**
   * `DELETE /v1/sessions/{session}`: erase every trace of the session; its
   * events are then refused (Gone, 410) for the tombstone's time (24 h).
   * Idempotent. @param {string} session @param {{tenant?: string} & CallOptions} [opts] @returns {Promise<EraseReceipt>}
   */
  eraseSession(session, opts = {}) {
    return this.json("DELETE", `/v1/sessions/${seg(session)}`, undefined, { ...opts, query: { tenant: opts.tenant } });
  }

  /**
   * `DELETE /v1/users/{user}`: erase a user's long-term memory (with `sessions`, their sessions too).
   * @param {string} user @param {{sessions?: boolean, tenant?: string} & CallOptions} [opts] @returns {Promise<EraseReceipt>}
   */
  eraseUser(user, opts = {}) {
    return this.json("DELETE", `/v1/users/${seg(user)}`, undefined, { ...opts, query: { sessions: opts.sessions || undefined, tenant: opts.tenant } });
  }

  /**
   * `GET /v1/sessions/{session}/export`: the session's records as Claude Code
   * JSONL records (parsed, in order); NotFound when nothing is stored.
   * @param {string} session @param {{tenant?: string} & CallOptions} [opts] @returns {Promise<Array<Record<string, any>>>}
   */
  async exportSession(session, opts = {}) {
    const r = await this.request("GET", `/v1/sessions/${seg(session)}/export`, { ...opts, query: { tenant: opts.tenant } });
    const text = typeof r.body === "string" ? r.body : "";
    return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  }

  /** `GET /v1/sessions/{session}/export?part=notes`: memory record and index entry. @param {string} session @param {{tenant?: string} & CallOptions} [opts] */
  exportNotes(session, opts = {}) {
    return this.json("GET", `/v1/sessions/${seg(session)}/export`, undefined, { ...opts, query: { part: "notes", tenant: opts.tenant } });
  }

  /** `GET /v1/users/{user}/export`: the user's long-term memory documents. @param {string} user @param {{tenant?: string} & CallOptions} [opts] */
  exportUser(user, opts = {}) {
    return this.json("GET", `/v1/users/${seg(user)}/export`, undefined, { ...opts, query: { tenant: opts.tenant } });
  }
}

/** @param {CloudEvent<any> | Record<string, any>} e @returns {CloudEvent<any>} */
function asEvent(e) {
  return e instanceof CloudEvent ? e : new CloudEvent(/** @type {any} */ (e));
}

/** @param {CallOptions["query"]} q */
function queryString(q) {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== "") p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
}

/**
 * How long to wait before retrying after err, or null when it is not retried.
 * @param {unknown} err @param {number} attempt
 */
function retryDelay(err, attempt) {
  if (!(err instanceof RecallError)) return null;
  if (!(err instanceof TransportError) && !RETRYABLE.has(err.status)) return null;
  const base = err.retryAfter !== null ? err.retryAfter * 1000 : Math.min(250 * 2 ** attempt, 5000);
  return base * (1 + Math.random() / 4);
}
