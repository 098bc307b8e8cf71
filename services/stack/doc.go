// Package stack runs a whole Recall in one process: an embedded NATS
// server with JetStream (unless Options.NATSURL names an external one),
// provisioning, and every service (ingest, trigger, extractor, compactor,
// indexer, long-term memory, and the model gateway when Options.GatewayAddr
// is set) under one supervisor. It is what `recall up`, `recall demo` and
// `recall eval` run, and what tests and the bench start when they need the
// real pipeline rather than one service.
//
// Contract:
//   - Start returns once the HTTP edge (and gateway) answer /healthz, every
//     micro service answers discovery and every transcript reader pulls
//     from every shard; on an error it has stopped whatever it started.
//   - The services read the rest of their configuration from RECALL_*
//     variables, as they would alone; Options override the addresses and
//     the LLM provider. Start reads the environment; nothing after it does.
//   - A service that returns an error is restarted after a growing pause; one
//     that fails five times in a row within a minute of starting stops the
//     stack, and Err reports it. Done is closed when every service returned.
//   - Close cancels the services, waits for each to drain (the shutdown
//     order of docs/architecture.md#shutdown), then stops the embedded server
//     and releases the data directory's lock. Close is not safe to call
//     concurrently with Start.
//   - With tenants (RECALL_TENANTS) the embedded server authenticates every
//     service and tenant with generated users (Auth, kept in
//     CredentialsFile in the data directory); without, it refuses to listen
//     anywhere but loopback.
//   - One data directory serves one stack at a time: a second Start on it
//     fails at once with ErrDataDirInUse.
package stack
