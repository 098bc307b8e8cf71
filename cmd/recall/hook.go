package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/recallhq/recall/internal/hook"
)

func init() {
	register(command{"hook", "answer a Claude Code hook (SessionStart, UserPromptSubmit, PreCompact, Stop) from stdin", runHook})
}

// runHook answers one Claude Code hook. It always exits 0 once its flags
// parse: a failure is logged on stderr and nothing is printed, so a Recall
// that is down never breaks Claude Code.
func runHook(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("hook")
	edge := addEdgeFlags(fs)
	timeout := fs.Duration("timeout", 10*time.Second, "the longest the hook may take")
	verbose := fs.Bool("v", false, "log what the hook did on stderr")
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
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	client := edge.client(nil)
	client.Attempts = 3 // Recall down: give up in about a second, not at --timeout
	cfg := hook.Config{Client: client, User: *edge.user, StatePath: *edge.state, Tenant: *edge.tenant, Timeout: *timeout, Log: log}
	if err := hook.Run(ctx, cfg, os.Stdin, stdout); err != nil {
		fmt.Fprintln(os.Stderr, "recall hook:", err)
	}
	return nil
}
