// A platform integrating with Recall from JavaScript, written from docs/api.md
// with Recall's package for the HTTP edge (@recallhq/recall, clients/js) and
// the official packages for the rest: cloudevents (HTTP binary mode), and the
// @nats-io ones (transport, JetStream, KV, services).
//
// It publishes a session over HTTP (structured, binary, batch) and over NATS,
// discovers Recall's services, asks for an extraction, receives the
// lifecycle notifications, reads the memory through the API and through KV,
// and compacts with chunk reassembly. It exits non-zero on the first thing
// that does not work as documented.
//
//   RECALL_HTTP   the HTTP edge          (default http://127.0.0.1:8080)
//   RECALL_NATS   the NATS server        (default nats://127.0.0.1:4222)
//   RECALL_TENANT the tenant             (default "default": recall up without RECALL_TENANTS)
//   RECALL_TOKEN  bearer token for HTTP  (none without RECALL_TENANTS)
//   RECALL_NATS_USER / RECALL_NATS_PASS  the tenant's NATS user, when the server authenticates
//
// Discovery ($SRV) and KV reads are operator views: with tenants configured a
// tenant's NATS user may not use them (docs/api.md, "Connecting as a
// tenant"); set RECALL_OPERATOR_VIEWS=0 to skip them.

import { connect, createInbox, headers as natsHeaders } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Svcm } from "@nats-io/services";
import { RecallClient } from "@recallhq/recall";
import { CloudEvent, HTTP } from "cloudevents";
import { randomUUID } from "node:crypto";

const httpBase = process.env.RECALL_HTTP ?? "http://127.0.0.1:8080";
const natsURL = process.env.RECALL_NATS ?? "nats://127.0.0.1:4222";
const tenant = process.env.RECALL_TENANT ?? "default";
const token = process.env.RECALL_TOKEN ?? "";
const operatorViews = process.env.RECALL_OPERATOR_VIEWS !== "0";
const session = `js-${randomUUID().slice(0, 8)}`;
const recall = new RecallClient({ url: httpBase, token: token || null });

const step = (what) => console.log(`▸ ${what}`);
function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

// One transcript record as a CloudEvent (docs/api.md, "Event types").
let n = 0;
function record(role, text, stopReason) {
  n++;
  const uuid = `${session}-r${n}`;
  return new CloudEvent({
    specversion: "1.0",
    id: uuid,
    source: "examples/js-client",
    type: "dev.recall.transcript.message",
    subject: session,
    datacontenttype: "application/json",
    data: {
      uuid,
      role,
      content: [{ type: "text", text }],
      ...(role === "assistant" ? { message_id: `msg-${uuid}`, stop_reason: stopReason ?? "end_turn" } : {}),
    },
  });
}

async function post(path, hdrs, body, want) {
  const h = { ...hdrs };
  if (token) h.authorization = `Bearer ${token}`;
  const res = await fetch(httpBase + path, { method: "POST", headers: h, body });
  const text = await res.text();
  check(res.status === want, `POST ${path} answered ${res.status}, want ${want}: ${text}`);
  return text ? JSON.parse(text) : null;
}

// request sends a request in the tenant's reply space and reassembles a
// chunked reply (docs/api.md, "Chunked replies"): subscribe first, publish
// with that reply subject, read chunk 0, then Recall-Chunks - 1 more.
async function request(nc, subject, body, hdrs, timeoutMs = 30000) {
  const inbox = createInbox(`_INBOX_TENANT.${tenant}`);
  const sub = nc.subscribe(inbox, { timeout: timeoutMs });
  nc.publish(subject, body ?? "", { reply: inbox, headers: hdrs });
  const parts = [];
  let total = 1;
  let first;
  for await (const m of sub) {
    const chunks = m.headers?.get("Recall-Chunks");
    const index = m.headers?.get("Recall-Chunk");
    if (parts.length === 0) {
      first = m;
      if (chunks) total = Number(chunks);
    }
    if (total > 1) check(Number(index) === parts.length, `chunk ${index} arrived as number ${parts.length}`);
    parts.push(m.data);
    if (parts.length === total) break;
  }
  sub.unsubscribe();
  const code = first.headers?.get("Nats-Service-Error-Code");
  const data = Buffer.concat(parts.map((p) => Buffer.from(p)));
  return { code, error: first.headers?.get("Nats-Service-Error"), json: data.length ? JSON.parse(data) : null, chunks: total };
}

async function main() {
  const nc = await connect({
    servers: natsURL,
    inboxPrefix: `_INBOX_TENANT.${tenant}`, // replies arrive only in the tenant's reply space
    user: process.env.RECALL_NATS_USER,
    pass: process.env.RECALL_NATS_PASS,
    name: "recall-js-client-example",
  });
  step(`connected to ${natsURL} as tenant ${tenant}, session ${session}`);

  // Notifications first, so none is missed.
  const seen = [];
  const notes = nc.subscribe(`recall.events.*.${tenant}.${session}`);
  (async () => {
    for await (const m of notes) seen.push(m.headers?.get("ce-type"));
  })();

  if (operatorViews) {
    const svc = new Svcm(nc).client({ maxWait: 2000 });
    const names = new Set();
    for await (const id of await svc.ping()) names.add(id.name);
    for (const want of ["recall-ingest", "recall-trigger", "recall-extractor", "recall-compactor"]) {
      check(names.has(want), `service ${want} answers $SRV.PING (found ${[...names].join(", ")})`);
    }
    step(`discovered ${[...names].sort().join(", ")}`);
  }

  // HTTP: structured and batch with the client, binary by hand (docs/api.md, "HTTP").
  const one = await recall.publish(record("user", "Add retries with jitter to the webhook sender; keep the 5 s timeout."));
  check(one.status === 202, `structured publish answered ${one.status}`);
  const binary = HTTP.binary(record("assistant", "Added exponential backoff with full jitter, 5 attempts, 5 s timeout kept."));
  await post("/v1/events", binary.headers, binary.body, 202);
  const batch = [record("user", "Also log every retry at debug level."), record("assistant", "Each retry now logs attempt and delay at debug.")];
  const res = await recall.publish(batch);
  check(res.status === 202 && res.results?.length === 2, "the batch answer lists both events");
  const again = await recall.publish(batch);
  check(again.duplicates === 2, `a resent batch is stored once (duplicates ${again.duplicates})`);
  step("published 4 records over HTTP (structured, binary, batch; a resend is a duplicate)");

  // NATS: binary mode on the ingest endpoint (docs/api.md, "Ingest endpoint").
  for (const ev of [record("user", "Make the retry count configurable."), record("assistant", "WEBHOOK_RETRIES now sets it (default 5).")]) {
    const enc = HTTP.binary(ev);
    const h = natsHeaders();
    for (const [k, v] of Object.entries(enc.headers)) h.set(k, String(v));
    const r = await request(nc, `recall.api.ingest.${tenant}.${session}`, enc.body, h);
    check(!r.code, `NATS ingest answered ${r.code}: ${r.error}`);
  }
  step("published 2 records over NATS");

  // A manual extraction (the session is below the token thresholds).
  const ex = await request(nc, `recall.api.extract.${tenant}.${session}`, JSON.stringify({ timeout_ms: 30000 }), undefined, 45000);
  check(!ex.code && ex.json?.success, `extraction: ${ex.code ?? ""} ${ex.error ?? JSON.stringify(ex.json)}`);
  step(`extraction done: revision ${ex.json.revision}`);

  const deadline = Date.now() + 5000;
  while (!seen.includes("dev.recall.extraction.completed") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  check(seen.includes("dev.recall.extraction.completed"), `notification extraction.completed (saw ${seen.join(", ")})`);
  step(`notifications: ${[...new Set(seen)].join(", ")}`);

  const mem = await request(nc, `recall.api.memory.${tenant}.${session}`);
  check(!mem.code && mem.json?.record?.notes?.includes("jitter"), `memory through the API: ${mem.code ?? ""} ${mem.error ?? ""}`);
  step(`memory (API): revision ${mem.json.revision}, ${mem.json.record.notes.length} characters of notes`);
  const viaHTTP = await recall.memory(session);
  check(viaHTTP.revision === mem.json.revision && viaHTTP.record.notes === mem.json.record.notes, "HTTP and NATS memory agree");
  step(`memory (HTTP, @recallhq/recall): revision ${viaHTTP.revision}`);
  if (operatorViews) {
    const kv = await new Kvm(jetstream(nc)).open("RECALL_MEMORY");
    const e = await kv.get(`${tenant}.${session}`);
    check(e && e.revision === mem.json.revision, `memory through KV at the API's revision (got ${e?.revision})`);
    check(JSON.parse(e.string()).notes === mem.json.record.notes, "KV and API notes agree");
    step(`memory (KV RECALL_MEMORY ${tenant}.${session}): revision ${e.revision}`);
  }

  const cp = await request(nc, `recall.api.compact.${tenant}.${session}`, JSON.stringify({ trigger: "manual" }));
  check(!cp.code && typeof cp.json?.outcome === "string", `compaction: ${cp.code ?? ""} ${cp.error ?? ""}`);
  step(`compaction: ${cp.json.outcome} (${cp.chunks} message(s)), tokens ${cp.json.tokens_before} → ${cp.json.tokens_after}`);

  const bad = await request(nc, `recall.api.compact.${tenant}.${session}`, JSON.stringify({ no_such_field: 1 }));
  check(bad.code === "400", `a bad compaction request is a 400 micro error (got ${bad.code})`);
  step(`a bad request: ${bad.code} ${bad.error}`);

  notes.unsubscribe();
  await nc.drain();
  console.log("ok: docs/api.md was enough");
}

main().catch((err) => {
  console.error(`js client: ${err.stack ?? err}`);
  process.exit(1);
});
