// Package triggersvc is Recall's trigger service.
package triggersvc

import (
	"context"
	"errors"
	"log/slog"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// Config configures the trigger service (environment variables RECALL_*).
type Config struct {
	NATS natsconn.Config
	provision.Config
}

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return errors.New("trigger: not implemented yet")
}
