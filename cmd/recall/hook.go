package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/recallhq/recall/internal/hook"
	"github.com/recallhq/recall/internal/telemetry"
)

// runHook answers one Claude Code hook. It always exits 0 once its flags
// parse: a failure is logged on stderr and nothing is printed, so a Recall
// that is down never breaks Claude Code.
func runHook(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("hook")
	edge := addEdgeFlags(fs)
	timeout := fs.Duration("timeout", 10*time.Second, "the longest the hook may take")
	verbose := fs.Bool("v", false, "log what the hook did on stderr")
	transcripts := fs.String("transcripts", envOr("RECALL_TRANSCRIPTS", defaultTranscripts()), "the only directory whose transcripts the hook reads (default $RECALL_TRANSCRIPTS or ~/.claude/projects)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: recall hook [--user U] [--recall-url URL] [--token TOKEN] < hook-input.json")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := edge.validate(); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := cliLog(level)
	c, err := edge.client(3, nil) // Recall down: give up in about a second, not at --timeout
	if err != nil {
		return err
	}
	cfg := hook.Config{Client: c, User: *edge.user, StatePath: *edge.state, Tenant: *edge.tenant, Timeout: *timeout, Log: log,
		Transcripts: *transcripts}
	if err := hook.Run(ctx, cfg, os.Stdin, stdout); err != nil {
		fmt.Fprintln(os.Stderr, "recall hook:", telemetry.Redact(err.Error()))
	}
	return nil
}

// defaultTranscripts is ~/.claude/projects, where Claude Code writes its
// transcripts.
func defaultTranscripts() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".claude", "projects")
}
