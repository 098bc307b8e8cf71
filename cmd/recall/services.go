package main

import (
	"context"
	"io"

	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// The single-service subcommands let one container image run any service.
func init() {
	register(command{"ingest", "run the ingest service (HTTP edge + NATS endpoint)", func(ctx context.Context, _ []string, _ io.Writer) error {
		return svcmain.Run(ctx, "ingest", ingestsvc.Run)
	}})
	register(command{"trigger", "run the trigger service", func(ctx context.Context, _ []string, _ io.Writer) error {
		return svcmain.Run(ctx, "trigger", triggersvc.Run)
	}})
	register(command{"extractor", "run an extractor worker", func(ctx context.Context, _ []string, _ io.Writer) error {
		return svcmain.Run(ctx, "extractor", extractorsvc.Run)
	}})
	register(command{"compactor", "run the compactor service", func(ctx context.Context, _ []string, _ io.Writer) error {
		return svcmain.Run(ctx, "compactor", compactorsvc.Run)
	}})
}
