// Package memory is Recall's domain: the session memory template and its
// sections, token estimation, the extraction trigger's state machine, edit
// application and its guards, and compaction window selection.
//
// It is pure: no NATS, no configuration loading, no telemetry SDK. Every
// function here is deterministic and safe to call concurrently on distinct
// values, which is what lets the services rebuild state from the transcript
// alone and lets tests check behaviour without servers.
package memory
