package ingestsvc

import (
	"context"
	"errors"
	"log/slog"
)

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return errors.New("ingest: not implemented yet")
}
