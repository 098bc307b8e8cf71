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

// Main runs Run until SIGINT/SIGTERM and exits non-zero on error.
func Main[C any](service string, run func(context.Context, C, *slog.Logger) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, service, run)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "recall %s: %v\n", service, err)
		os.Exit(1)
	}
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
