// Errors mapped from Recall's problem bodies (docs/api.md, "Problem types"),
// the same classes by status as the Python client (clients/python).

/**
 * An error answered by Recall, or no answer at all ({@link TransportError}).
 * Fields mirror the problem document (RFC 9457).
 */
export class RecallError extends Error {
  /**
   * @param {string} message
   * @param {{status?: number, type?: string, title?: string, detail?: string,
   *   problem?: Record<string, any>, retryAfter?: number | null, body?: string, cause?: unknown}} [init]
   */
  constructor(message, init = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    /** HTTP status (0: no answer). */
    this.status = init.status ?? 0;
    /** The problem type URI, e.g. `…/docs/api.md#invalid-event`. */
    this.type = init.type ?? "";
    this.title = init.title ?? "";
    this.detail = init.detail ?? "";
    /** The whole decoded problem document. @type {Record<string, any>} */
    this.problem = init.problem ?? {};
    /** Seconds from `Retry-After`, or null. @type {number | null} */
    this.retryAfter = init.retryAfter ?? null;
    /** The raw body when it was not a problem document. */
    this.body = init.body ?? "";
  }

  /** The problem type's name: the fragment of `type` (`invalid-event`, `too-large`, …). */
  get kind() {
    const i = this.type.lastIndexOf("#");
    return i >= 0 ? this.type.slice(i + 1) : this.type;
  }

  /** Per-event errors of an events request. @returns {Array<Record<string, any>>} */
  get errors() {
    return Array.isArray(this.problem.errors) ? this.problem.errors : [];
  }

  /** Per-event results of an events request. @returns {Array<Record<string, any>>} */
  get results() {
    return Array.isArray(this.problem.results) ? this.problem.results : [];
  }
}

/** Recall could not be reached, or an attempt's deadline passed without an answer. */
export class TransportError extends RecallError {}
export class BadRequest extends RecallError {}
export class Unauthorized extends RecallError {}
export class Forbidden extends RecallError {}
export class NotFound extends RecallError {}
export class RequestTimeout extends RecallError {}
/** 409; an ambiguous session reference lists `candidates`. */
export class Conflict extends RecallError {
  /** @returns {Array<Record<string, any>>} */
  get candidates() {
    return Array.isArray(this.problem.candidates) ? this.problem.candidates : [];
  }
}
/** 410: the session was erased; its events are refused until the tombstone expires. */
export class Gone extends RecallError {}
/** 412: `If-Match` named a configuration revision that is no longer the stored one. */
export class PreconditionFailed extends RecallError {}
export class TooLarge extends RecallError {}
export class UnsupportedMediaType extends RecallError {}
export class Unprocessable extends RecallError {}
/** 429: the tenant is over its share; retry after `retryAfter` seconds. */
export class TooManyRequests extends RecallError {}
export class ServerError extends RecallError {}
/** 503: JetStream did not acknowledge, no service answers, or the edge is full. */
export class Unavailable extends ServerError {}
export class GatewayTimeout extends ServerError {}

/** @type {Record<number, typeof RecallError>} */
const BY_STATUS = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  408: RequestTimeout,
  409: Conflict,
  410: Gone,
  412: PreconditionFailed,
  413: TooLarge,
  415: UnsupportedMediaType,
  422: Unprocessable,
  429: TooManyRequests,
  503: Unavailable,
  504: GatewayTimeout,
};

/**
 * Seconds from a Retry-After header (delta-seconds or an HTTP date), or null.
 * @param {string | null | undefined} value
 * @returns {number | null}
 */
export function parseRetryAfter(value) {
  if (!value) return null;
  const n = Number(value.trim());
  if (Number.isFinite(n)) return Math.max(0, n);
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : Math.max(0, (t - Date.now()) / 1000);
}

/**
 * The error for an error reply, its class chosen by status.
 * @param {number} status
 * @param {Headers | null} headers
 * @param {string} text the body
 * @param {string} [what] the request, for the message (`POST /v1/events`)
 * @returns {RecallError}
 */
export function fromResponse(status, headers, text, what = "") {
  /** @type {Record<string, any>} */
  let problem = {};
  try {
    const d = text.trim() ? JSON.parse(text) : {};
    if (d && typeof d === "object" && !Array.isArray(d)) problem = d;
  } catch {
    // not JSON: keep the text as body
  }
  const Cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : RecallError);
  const title = String(problem.title ?? "");
  const detail = String(problem.detail ?? "");
  const head = `${status} ${title}`.trim();
  const tail = detail || text.trim().slice(0, 200);
  return new Cls(`${what ? what + ": " : ""}${tail ? `${head}: ${tail}` : head}`, {
    status,
    type: String(problem.type ?? ""),
    title,
    detail,
    problem,
    retryAfter: parseRetryAfter(headers?.get("retry-after")),
    body: Object.keys(problem).length ? "" : text,
  });
}
