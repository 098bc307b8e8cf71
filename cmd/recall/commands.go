package main

import (
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/gateway/gatewaysvc"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// commandList is every subcommand of recall, in one place: a new command is
// a function in its own file and a line here (there is no registration in
// init). `recall help` prints them sorted by name.
func commandList() []command {
	return []command{
		// The pipeline in one process, and the tools that run on it.
		{"backup", "copy everything Recall stores (every stream, bucket and object store, as stream snapshots) into a directory, with a manifest", runBackup},
		{"bench", "measure Recall against the raw NATS ceilings of the same server (docs/benchmarks.md)", runBench},
		{"commit", "commit a session's batch to long-term memory now, or list / replay failed (parked) commits (--failed, --replay-failed)", runCommit},
		{"compact", "compact a session from its memory and print the result", runCompact},
		{"config", "print every environment variable with its default", runConfig},
		{"demo", "replay a bundled coding session through every service and compact it (start here)", runDemo},
		{"edit", "ask which old tool results and thinking to clear from a session's context", runEdit},
		{"erase", "erase a session (--session) or a user's long-term memory (--user, --sessions: and her sessions) everywhere; prints the receipt", runErase},
		{"eval", "measure what a compacted context still knows, against baselines (docs/eval.md)", runEval},
		{"export", "export a session as Claude Code JSONL (--notes: its notes and index entry) or a user's long-term memory (--user) to stdout", runExport},
		{"extract", "run a manual extraction, or list / replay failed (parked) extractions", runExtract},
		{"hook", "answer a Claude Code hook (SessionStart, UserPromptSubmit, PreCompact, Stop) from stdin", runHook},
		{"index", "index a session now (after a running indexing of it)", runIndex},
		{"ltm", "show a user's long-term memory (show --user U [--types a,b] [--context]) or a document's revisions with diffs (history --user U --type T [--peer P])", runLTM},
		{"mcp", "serve Recall's session tools to agents over MCP (stdio, or streamable HTTP with --http)", runMCP},
		{"memory", "show a session's memory (get) or its revisions with diffs (history)", runMemory},
		{"migrate", "move a single-stream transcript (RECALL_TRANSCRIPT) into its shard streams; stop the services first (resumable, idempotent; --dry-run counts)", runMigrate},
		{"nats-permissions", "print the NATS permissions of a tenant's platform user or of the service users", runNATSPermissions},
		{"probe", "GET a URL and exit non-zero unless it answers 2xx (container health checks)", runProbe},
		{"query", "ask a past session a question", runQuery},
		{"replay", "import a Claude Code JSONL transcript and publish it to Recall", runReplay},
		{"restore", "restore a backup into an empty server or data directory (--force replaces what is there) and erase its erased sessions again", runRestore},
		{"resolve", "resolve a session reference: an id, a name, a fuzzy name, name~N for ancestors", runResolve},
		{"sessions", "list the session index (ls) or show one session's entry (show)", runSessions},
		{"tenant", "read, write, edit, validate and list the history of a tenant's configuration (get|set|edit|validate|history)", runTenant},
		{"up", "run every service on an embedded NATS server (the newcomer's default)", runUp},
		{"watch", "follow Claude Code's live transcripts and send them to Recall", runWatch},
		// One service each, so one container image runs any service.
		serviceCommand("ingest", "run the ingest service (HTTP edge + NATS endpoint)", ingestsvc.Run),
		serviceCommand("trigger", "run the trigger service", triggersvc.Run),
		serviceCommand("extractor", "run an extractor worker", extractorsvc.Run),
		serviceCommand("compactor", "run the compactor service", compactorsvc.Run),
		serviceCommand("indexer", "run the session index service", indexersvc.Run),
		serviceCommand("longterm", "run the long-term memory service", longtermsvc.Run),
		serviceCommand("gateway", "run the model gateway (docs/gateway.md)", gatewaysvc.Run),
	}
}
