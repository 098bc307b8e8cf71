// Package svcmain is the body every service's main shares: signals,
// environment configuration, telemetry, run, flush.
package svcmain

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/telemetry"
)

// EnvPrefix is the prefix of every Recall environment variable.
const EnvPrefix = "RECALL"

// Main runs Run until SIGINT/SIGTERM and exits non-zero on error. With -h
// (or --help) it prints the service's configuration help (Help) and exits 0
// without starting; any other argument is an error (exit 2).
func Main[C any](service string, run func(context.Context, C, *slog.Logger) error) {
	if args := os.Args[1:]; len(args) > 0 {
		if IsHelp(args) {
			_ = Help[C](os.Stdout, service)
			return
		}
		fmt.Fprintf(os.Stderr, "recall %s: takes no arguments (configuration is RECALL_* environment variables; -h lists them)\n", service)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, service, run)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "recall %s: %v\n", service, err)
		os.Exit(1)
	}
}

// IsHelp reports whether args ask for help (-h, -help or --help).
func IsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// Help writes the configuration help of service, whose configuration type
// is C: every environment variable with its default and description, then
// the telemetry variables every service shares.
func Help[C any](w io.Writer, service string) error {
	const format = `{{range .}}  {{usage_key .}}	{{usage_default .}}	{{usage_description .}}
{{end}}`
	fmt.Fprintf(w, "Usage: recall %s\n\nRuns the %s service until SIGINT or SIGTERM. It is configured by environment variables:\n\n", service, service)
	var cfg C
	var tc telemetry.Config
	for _, spec := range []any{&cfg, &tc} {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if err := envconfig.Usagef(EnvPrefix, spec, tw, format); err != nil {
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if spec == any(&cfg) {
			fmt.Fprintln(w, "\n  telemetry (every service):")
		}
	}
	return nil
}

// Run reads the service's configuration from the environment, sets up
// telemetry, calls run until ctx is done, then flushes telemetry.
func Run[C any](ctx context.Context, service string, run func(context.Context, C, *slog.Logger) error) error {
	var cfg C
	var tc telemetry.Config
	if err := envconfig.Process(EnvPrefix, &cfg); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if err := envconfig.Process(EnvPrefix, &tc); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := telemetry.DefaultLogger(tc).With("service", service)
	tel, err := telemetry.Setup(ctx, tc, service)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	log.Info("starting", "config", cfg)
	runErr := run(ctx, cfg, log)
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(flushCtx); err != nil {
		log.Warn("flushing telemetry", "err", err)
	}
	return runErr
}
