// Package svcmain is the body every service's main shares: signals,
// environment configuration, telemetry, run, flush.
package svcmain

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/telemetry"
)

// EnvPrefix is the prefix of every Recall environment variable.
const EnvPrefix = "RECALL"

// Main reads cfg from the environment, sets up telemetry for service, calls
// run until SIGINT/SIGTERM, flushes telemetry and exits non-zero on error.
func Main[C any](service string, run func(context.Context, C, *slog.Logger) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg C
	var tc telemetry.Config
	if err := envconfig.Process(EnvPrefix, &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "recall %s: configuration: %v\n", service, err)
		os.Exit(2)
	}
	if err := envconfig.Process(EnvPrefix, &tc); err != nil {
		fmt.Fprintf(os.Stderr, "recall %s: configuration: %v\n", service, err)
		os.Exit(2)
	}
	log := telemetry.DefaultLogger(tc).With("service", service)
	tel, err := telemetry.Setup(ctx, tc, service)
	if err != nil {
		log.Error("telemetry setup failed", "err", err)
		os.Exit(1)
	}
	runErr := run(ctx, cfg, log)
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(flushCtx); err != nil {
		log.Warn("flushing telemetry", "err", err)
	}
	if runErr != nil {
		log.Error("stopped with error", "err", runErr)
		os.Exit(1)
	}
}
