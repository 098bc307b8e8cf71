// faults.mjs: a front for the scripted upstream that answers scripted
// provider errors and passes everything else through, byte for byte and as it
// streams. A request whose JSON body names model "scripted-error-<status>"
// (529, 429, 401, 400, 500) is answered with that status in the provider's
// own error shape and headers; the SDK checks assert that the gateway passes
// both to the client verbatim.
//
//   node test/clients/lib/faults.mjs UPSTREAM_URL   prints "faults listening on http://ADDR"
import http from "node:http";

const ANTHROPIC_TYPES = { 400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error" };
const OPENAI_CODES = { 400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded", 500: "server_error", 529: "server_overloaded" };

// scriptedError is the answer for a model name "scripted-error-<status>", the
// same for every caller so checks can compare it: {status, headers, body}.
export function scriptedError(path, status) {
  const id = `req_scripted_${status}`;
  if (path.startsWith("/v1/messages")) {
    return {
      status,
      headers: { "content-type": "application/json", "request-id": id, "retry-after": "7", "x-should-retry": "false", "anthropic-ratelimit-requests-remaining": "0" },
      body: JSON.stringify({ type: "error", error: { type: ANTHROPIC_TYPES[status] || "api_error", message: `scripted ${status}` }, request_id: id }),
    };
  }
  return {
    status,
    headers: { "content-type": "application/json", "x-request-id": id, "retry-after": "7", "x-should-retry": "false", "x-ratelimit-remaining-requests": "0" },
    body: JSON.stringify({ error: { message: `scripted ${status}`, type: status === 429 ? "requests" : "server_error", param: null, code: OPENAI_CODES[status] || "server_error" } }),
  };
}

function serve(upstream) {
  const target = new URL(upstream);
  return http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const m = /"model"\s*:\s*"scripted-error-(\d{3})"/.exec(body.toString("utf8"));
      if (m) {
        const e = scriptedError(new URL(req.url, "http://x").pathname, Number(m[1]));
        res.writeHead(e.status, e.headers);
        return res.end(e.body);
      }
      const headers = { ...req.headers, host: target.host };
      const out = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (up) => {
        res.writeHead(up.statusCode, up.headers);
        up.pipe(res);
      });
      out.on("error", (err) => { res.writeHead(502, { "content-type": "text/plain" }); res.end(`faults: upstream: ${err.message}`); });
      out.end(body);
    });
  });
}

if (process.argv[1] && process.argv[1].endsWith("faults.mjs")) {
  const server = serve(process.argv[2]);
  server.listen(0, "127.0.0.1", () => console.log(`faults listening on http://127.0.0.1:${server.address().port}`));
  for (const s of ["SIGINT", "SIGTERM"]) process.on(s, () => server.close(() => process.exit(0)));
}
