// Package ingestsvc is Recall's ingest service: the HTTP edge (POST
// /v1/events and the session API) and the NATS ingest endpoint. It validates
// CloudEvents, stamps the authenticated tenant, and answers only after
// JetStream stored the event.
package ingestsvc

import (
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// Config configures the ingest service (environment variables RECALL_*).
type Config struct {
	NATS natsconn.Config
	provision.Config
	HTTPAddr string `envconfig:"HTTP_ADDR" default:"127.0.0.1:8080" desc:"HTTP edge listen address"`
}
