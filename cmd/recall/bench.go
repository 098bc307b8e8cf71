package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/recallhq/recall/cmd/recall/internal/bench"
)

func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench")
	quick := fs.Bool("quick", false, "small sizes, under 60 s (CI smoke; the numbers mean little)")
	huge := fs.Bool("huge", false, "add a 1,000,000-record transcript to the compaction scenario (flatness to a million; about a minute more)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	natsURL := fs.String("nats-url", "", "run against this NATS server instead of an embedded one (Recall's streams there are DELETED)")
	force := fs.Bool("force", false, "with --nats-url: run even if the server holds Recall transcripts")
	only := fs.String("only", "", "comma-separated scenarios to run ("+strings.Join(bench.Scenarios, ",")+")")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	soak := fs.Duration("soak", 0, "instead of the scenarios: a soak of this duration (services as child processes, one SIGKILLed per phase; docs/reliability.md)")
	profile := fs.String("profile-dir", "", "write a CPU profile of each scenario (<scenario>.cpu.pprof) to this directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *soak != 0 {
		return runSoak(ctx, *soak, *asJSON, *quiet, *profile, stdout)
	}
	o := bench.Options{Quick: *quick, Huge: *huge, URL: *natsURL, Force: *force, Progress: os.Stderr, ProfileDir: *profile}
	if *quiet {
		o.Progress = nil
	}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Only = append(o.Only, s)
		}
	}
	res, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("writing JSON: %w", err)
		}
		return nil
	}
	return bench.PrintTable(stdout, res)
}
