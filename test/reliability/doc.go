// Package reliability holds the tests that try to break Recall's promises:
// faults (a chaos run that kills services and restarts NATS, a three-node
// JetStream cluster losing a node, a hung model), bad input (limits at the
// HTTP edge) and other tenants (isolation over HTTP and NATS, TLS and nkey
// connections, the extractor's tool guard against prompt injection, secrets
// kept out of logs and events).
//
// The package has no code of its own besides this comment: everything is in
// _test.go files, and docs/reliability.md lists each guarantee with the test
// that proves it and the figures of the last run.
package reliability
