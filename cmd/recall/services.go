package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/gateway/gatewaysvc"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// The single-service subcommands let one container image run any service.
func init() {
	register(serviceCommand("ingest", "run the ingest service (HTTP edge + NATS endpoint)", ingestsvc.Run))
	register(serviceCommand("trigger", "run the trigger service", triggersvc.Run))
	register(serviceCommand("extractor", "run an extractor worker", extractorsvc.Run))
	register(serviceCommand("compactor", "run the compactor service", compactorsvc.Run))
	register(serviceCommand("indexer", "run the session index service", indexersvc.Run))
	register(serviceCommand("longterm", "run the long-term memory service", longtermsvc.Run))
	register(serviceCommand("gateway", "run the model gateway (docs/gateway.md)", gatewaysvc.Run))
}

// serviceCommand runs one service from its RECALL_* environment. It takes
// no arguments; -h prints the service's configuration help instead of
// starting it.
func serviceCommand[C any](name, summary string, run func(context.Context, C, *slog.Logger) error) command {
	return command{name, summary, func(ctx context.Context, args []string, stdout io.Writer) error {
		fs := newFlags(name)
		fs.SetOutput(stdout)
		fs.Usage = func() { _ = svcmain.Help[C](stdout, name) }
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: %s takes no arguments (configuration is RECALL_* environment variables; -h lists them)", errUsage, name)
		}
		return svcmain.Run(ctx, name, run)
	}}
}
