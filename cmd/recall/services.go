package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/recallhq/recall/internal/svcmain"
)

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
