package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/recallhq/recall/internal/mcpserver"
)

// runMCP wires flags and RECALL_URL / RECALL_TOKEN into mcpserver.Run.
// Over stdio, stdout carries the protocol: logs go to stderr.
func runMCP(ctx context.Context, args []string, _ io.Writer) error {
	fs := newFlags("mcp")
	recallURL := fs.String("recall-url", envOr("RECALL_URL", "http://127.0.0.1:8080"), "base URL of Recall's HTTP edge (default $RECALL_URL or http://127.0.0.1:8080)")
	token := fs.String("token", os.Getenv("RECALL_TOKEN"), "bearer token for the HTTP edge; it decides the tenant (default $RECALL_TOKEN; none in open mode)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address at "+mcpserver.Path+" instead of stdio (e.g. 127.0.0.1:8090)")
	verbose := fs.Bool("v", false, "debug-level logs to stderr (always stderr: over stdio, stdout is the protocol)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: recall mcp takes no arguments", errUsage)
	}
	level := slog.LevelWarn
	if *httpAddr != "" {
		level = slog.LevelInfo
	}
	if *verbose {
		level = slog.LevelDebug
	}
	log := cliLog(level)
	return mcpserver.Run(ctx, mcpserver.Config{RecallURL: *recallURL, Token: *token, HTTPAddr: *httpAddr}, log)
}
