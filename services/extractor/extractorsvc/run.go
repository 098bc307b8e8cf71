// Package extractorsvc is Recall's extractor service.
package extractorsvc

import (
	"context"
	"errors"
	"log/slog"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// Config configures the extractor service (environment variables RECALL_*).
type Config struct {
	NATS natsconn.Config
	provision.Config
}

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return errors.New("extractor: not implemented yet")
}
