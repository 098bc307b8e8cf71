package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/recallhq/recall/services/longterm/ltmeval"
)

// quickLTMSessions is --ltm --quick's sessions a user: past the first
// checkpoint (10), in seconds.
const quickLTMSessions = 20

// ltmArgs are the flags of `recall eval --ltm`.
type ltmArgs struct {
	sessions             int
	dump                 string
	quick, asJSON, quiet bool
	log                  *slog.Logger
}

// ltmReport is --ltm --json's output: the hygiene report under "ltm".
type ltmReport struct {
	LTM *ltmeval.Report `json:"ltm"`
}

// runEvalLTM runs the long-term memory hygiene measure (ltmeval) and
// prints its report.
func runEvalLTM(ctx context.Context, a ltmArgs, stdout io.Writer) error {
	n := a.sessions
	switch {
	case n < 0:
		return fmt.Errorf("--ltm-sessions %d: want a positive number of sessions a user", n)
	case n == 0 && a.quick:
		n = quickLTMSessions
	case n == 0:
		n = ltmeval.DefaultSessions
	}
	if a.dump != "" {
		if err := os.MkdirAll(a.dump, 0o755); err != nil {
			return err
		}
	}
	o := ltmeval.Options{Sessions: n, Log: a.log, DumpDir: a.dump}
	var bar *progress
	if !a.quiet {
		bar = newProgress(os.Stderr, n*len(ltmeval.DefaultUsers), "sessions")
		o.Progress = func(done, _ int) { bar.set(done) }
	}
	rep, err := ltmeval.Run(ctx, o)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		return fmt.Errorf("long-term memory hygiene: %w", err)
	}
	if a.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ltmReport{LTM: rep}); err != nil {
			return fmt.Errorf("writing JSON: %w", err)
		}
		return nil
	}
	return ltmeval.PrintTable(stdout, rep)
}
