// Package e2e holds end-to-end tests that run every Recall service in one
// process against a real embedded NATS server.
package e2e
