package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/recallhq/recall/cmd/recall/internal/bench"
)

// runSoak is `recall bench --soak D` (docs/reliability.md, "Soak"): it
// fails when an acknowledged event was lost or stored twice, or a service
// exited on its own, after printing the report.
func runSoak(ctx context.Context, d time.Duration, asJSON, quiet bool, profileDir string, stdout io.Writer) error {
	o := bench.SoakOptions{Duration: d, Progress: os.Stderr, ProfileDir: profileDir}
	if quiet {
		o.Progress = nil
	}
	rep, err := bench.Soak(ctx, o)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("writing JSON: %w", err)
		}
	} else if err := bench.PrintSoak(stdout, rep); err != nil {
		return err
	}
	if r := rep.Soak; r.Lost > 0 || r.Duplicated > 0 || r.UncleanExits > 0 || len(r.StopErrors) > 0 {
		return fmt.Errorf("soak failed: %d lost, %d duplicated, %d unclean exits, stop errors %v (data and logs: %s)", r.Lost, r.Duplicated, r.UncleanExits, r.StopErrors, r.KeptDir)
	}
	return nil
}
