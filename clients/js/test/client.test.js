// The client against a fake HTTP edge (node:http): error mapping by status,
// retries with a per-attempt deadline, and a lost reply resent unchanged.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, test } from "node:test";
import * as recall from "../src/index.js";

const { RecallClient, events: ev } = recall;

/** A scripted edge: each request takes the next handler. */
let handlers = [];
const seen = [];
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    seen.push({ method: req.method, url: req.url, headers: req.headers, body });
    const h = handlers.shift() ?? ((_q, s) => s.writeHead(200, { "content-type": "application/json" }).end("{}"));
    h(req, res);
  });
});
let url;
before(async () => {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

const reply = (status, body, headers = {}) => (_q, res) => {
  const ctype = status >= 400 || status === 207 ? "application/problem+json" : "application/json";
  res.writeHead(status, { "content-type": ctype, ...headers }).end(JSON.stringify(body));
};

test("a problem body becomes the error class of its status", async () => {
  const cases = [
    [400, recall.BadRequest, "invalid-event"],
    [401, recall.Unauthorized, "unauthenticated"],
    [404, recall.NotFound, "not-found"],
    [409, recall.Conflict, "ambiguous-reference"],
    [410, recall.Gone, "gone"],
    [412, recall.PreconditionFailed, "revision-mismatch"],
    [413, recall.TooLarge, "too-large"],
    [422, recall.Unprocessable, "unprocessable"],
  ];
  const c = new RecallClient({ url, retryForMs: 0 });
  for (const [status, cls, kind] of cases) {
    handlers = [reply(status, { type: `https://x/docs/api.md#${kind}`, title: "T", status, detail: `d${status}`, errors: [{ index: 0, id: "e1", field: "subject" }] })];
    await assert.rejects(c.memory("s1"), (err) => {
      assert.ok(err instanceof cls, `${status}: ${err.name}`);
      assert.equal(err.status, status);
      assert.equal(err.kind, kind);
      assert.equal(err.detail, `d${status}`);
      assert.equal(err.errors[0].field, "subject");
      return true;
    });
  }
});

test("a 207 resolves with partial and the rejected events", async () => {
  const c = new RecallClient({ url });
  handlers = [reply(207, { type: "x#partially-accepted", status: 207, errors: [{ index: 1, id: "b", status: 400 }], results: [{ index: 0, status: 202 }, { index: 1, status: 400 }] })];
  const r = await c.publish([ev.message("s1", "user", "a", { uuid: "a" }), ev.message("s1", "user", "b", { uuid: "b" })]);
  assert.equal(r.status, 207);
  assert.equal(r.partial, true);
  assert.equal(r.errors[0].id, "b");
  assert.equal(seen.at(-1).headers["content-type"], "application/cloudevents-batch+json");
});

test("429 and 503 are retried after Retry-After; a 400 is not", async () => {
  const c = new RecallClient({ url, timeoutMs: 2000, retryForMs: 10_000 });
  handlers = [reply(429, { status: 429 }, { "retry-after": "0" }), reply(503, { status: 503 }, { "retry-after": "0" }), reply(200, { key: "k", revision: 3, record: { notes: "n" } })];
  const m = await c.memory("s1");
  assert.equal(m.revision, 3);
  handlers = [reply(400, { status: 400 }), reply(200, {})];
  const n = seen.length;
  await assert.rejects(c.compact("s1", { bogus: 1 }), recall.BadRequest);
  assert.equal(seen.length, n + 1, "a 400 is sent once");
  handlers = [];
});

test("a lost reply is resent with the same event ids; each attempt has its own deadline", async () => {
  const c = new RecallClient({ url, timeoutMs: 300, retryForMs: 5000 });
  const hang = () => {}; // never answers: the attempt's deadline ends it
  const drop = (req) => req.socket.destroy(); // stored, but the reply is lost
  handlers = [hang, drop, reply(202, { accepted: 2, duplicates: 2, results: [] })];
  const evs = [ev.message("s9", "user", "hello", { uuid: "r1" }), ev.message("s9", "assistant", "hi", { uuid: "r2" })];
  const n = seen.length;
  const r = await c.publish(evs);
  assert.equal(r.status, 202);
  const bodies = seen.slice(n).map((s) => s.body);
  assert.equal(bodies.length, 3);
  assert.equal(new Set(bodies).size, 1, "every attempt sends the same body");
  assert.deepEqual(JSON.parse(bodies[0]).map((e) => e.id), ["s9-r1", "s9-r2"]);
});

test("no answer within the retry window is a TransportError", async () => {
  const c = new RecallClient({ url: "http://127.0.0.1:1", timeoutMs: 100, retryForMs: 400 });
  await assert.rejects(c.memory("s1"), recall.TransportError);
  assert.throws(() => new RecallClient({ timeoutMs: 5000, retryForMs: 5000 }), RangeError);
});

test("every verb sends its documented request", async () => {
  const c = new RecallClient({ url, token: "tok", retryForMs: 0 });
  const calls = [
    [() => c.compact("a b", { trigger: "manual" }), "POST", "/v1/sessions/a%20b/compact", { trigger: "manual" }],
    [() => c.edit("s", {}), "POST", "/v1/sessions/s/edit", {}],
    [() => c.extract("s", { timeoutMs: 1000 }), "POST", "/v1/sessions/s/extract", { timeout_ms: 1000 }],
    [() => c.memory("s"), "GET", "/v1/sessions/s/memory"],
    [() => c.listSessions({ q: "x", limit: 2 }), "GET", "/v1/sessions?q=x&limit=2"],
    [() => c.getSession("s"), "GET", "/v1/sessions/s/index"],
    [() => c.index("s"), "POST", "/v1/sessions/s/index"],
    [() => c.resolve("name~1"), "GET", "/v1/resolve?ref=name%7E1"],
    [() => c.resolve({ text: "see @@x", answer: true }), "POST", "/v1/resolve", { text: "see @@x", answer: true }],
    [() => c.query("s", "why?", { budgetTokens: 9 }), "POST", "/v1/sessions/s/query", { question: "why?", budget_tokens: 9 }],
    [() => c.commit("s"), "POST", "/v1/sessions/s/commit"],
    [() => c.userMemory("u", { types: ["a", "b"] }), "GET", "/v1/users/u/memory?types=a%2Cb"],
    [() => c.getConfig(), "GET", "/v1/config"],
    [() => c.setConfig({ a: 1 }, { merge: true, ifMatch: 4 }), "PATCH", "/v1/config", { a: 1 }],
    [() => c.configHistory(), "GET", "/v1/config/history"],
    [() => c.eraseSession("s"), "DELETE", "/v1/sessions/s"],
    [() => c.eraseUser("u", { sessions: true }), "DELETE", "/v1/users/u?sessions=true"],
    [() => c.exportNotes("s"), "GET", "/v1/sessions/s/export?part=notes"],
    [() => c.exportUser("u"), "GET", "/v1/users/u/export"],
  ];
  for (const [call, method, path, body] of calls) {
    handlers = [reply(200, {})];
    await call();
    const s = seen.at(-1);
    assert.equal(`${s.method} ${s.url}`, `${method} ${path}`);
    assert.equal(s.headers.authorization, "Bearer tok");
    if (body) assert.deepEqual(JSON.parse(s.body), body);
  }
  assert.equal(seen.at(-6).headers["if-match"], '"4"');
  handlers = [(_q, res) => res.writeHead(200, { "content-type": "application/x-ndjson" }).end('{"type":"user","uuid":"a"}\n{"type":"assistant","uuid":"b"}\n')];
  assert.deepEqual((await c.exportSession("s")).map((l) => l.uuid), ["a", "b"]);
});
