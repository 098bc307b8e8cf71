// Package ingestsvc is Recall's ingest service: the HTTP edge (POST
// /v1/events and the session API) and the NATS ingest endpoint. It validates
// CloudEvents, stamps the authenticated tenant, and answers only after
// JetStream stored the event.
//
// Shutdown, when the context given to Run is done: the HTTP listener closes
// and in-flight HTTP requests finish (their acks included), the micro
// service stops and in-flight NATS requests are answered, then both NATS
// connections drain. A clean stop returns nil.
package ingestsvc

import (
	"log/slog"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// Config configures the ingest service (environment variables RECALL_*).
type Config struct {
	NATS natsconn.Config
	provision.Config
	HTTPAddr string `envconfig:"HTTP_ADDR" default:"127.0.0.1:8080" desc:"HTTP edge listen address (an empty address serves no HTTP)"`
	// Tenants lists "tenant:sha256hex" pairs, comma separated. Empty means a
	// single tenant "default" without authentication (localhost use only).
	Tenants        string        `envconfig:"TENANTS" desc:"bearer tokens per tenant as tenant:sha256(token) hex, comma separated; empty = single tenant 'default' without auth (secret)"`
	OperatorTokens string        `envconfig:"OPERATOR_TOKENS" desc:"console operator tokens as sha256(token) hex, comma separated: they see every tenant and may replay parked extractions"`
	MaxEventBytes  int           `envconfig:"INGEST_MAX_EVENT_BYTES" default:"16777216" desc:"largest accepted event (encoded JSON or binary body), bytes; larger ones get 413 naming the limit and the size"`
	InlineBytes    int           `envconfig:"INGEST_INLINE_BYTES" default:"524288" desc:"largest event stored whole in its transcript record, bytes (at most the server's max_payload less 64 KiB); a larger one's body goes to the RECALL_BLOBS object store (claim check)"`
	MaxBatchEvents int           `envconfig:"INGEST_MAX_BATCH_EVENTS" default:"1000" desc:"most events in one batch"`
	MaxBodyBytes   int64         `envconfig:"INGEST_MAX_BODY_BYTES" default:"17825792" desc:"largest accepted HTTP request body, bytes (raised to INGEST_MAX_EVENT_BYTES + 1 KiB when lower, so one event of the largest size fits)"`
	BodyTimeout    time.Duration `envconfig:"INGEST_BODY_TIMEOUT" default:"30s" desc:"longest time to receive one HTTP request body (408 after)"`
	MaxBodies      int           `envconfig:"INGEST_MAX_BODIES" default:"16" desc:"most HTTP request bodies read at once (503 with Retry-After beyond); bounds the edge's memory with INGEST_MAX_BODY_BYTES"`
	PublishTimeout time.Duration `envconfig:"INGEST_PUBLISH_TIMEOUT" default:"10s" desc:"how long to wait for JetStream to acknowledge an event"`
	MaxPending     int           `envconfig:"INGEST_MAX_PENDING" default:"8192" desc:"most unacknowledged async publishes before publishing stalls"`
	APITimeout     time.Duration `envconfig:"INGEST_API_TIMEOUT" default:"120s" desc:"how long the HTTP session API waits for a NATS reply"`
	ShutdownGrace  time.Duration `envconfig:"INGEST_SHUTDOWN_GRACE" default:"30s" desc:"how long shutdown waits for in-flight requests"`
}

// LogValue masks the tenant token hashes.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("nats", c.NATS),
		slog.String("http_addr", c.HTTPAddr),
		slog.Int("tenants", len(splitList(c.Tenants))),
		slog.Int("max_event_bytes", c.MaxEventBytes),
		slog.Int("inline_bytes", c.InlineBytes),
		slog.Int("max_batch_events", c.MaxBatchEvents),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.Duration("body_timeout", c.BodyTimeout),
		slog.Int("max_bodies", c.MaxBodies),
		slog.Duration("publish_timeout", c.PublishTimeout),
		slog.Int("partitions", c.Partitions),
		slog.Int("replicas", c.Replicas),
	)
}

// withDefaults fills zero values, so tests may build a Config literal.
func (c Config) withDefaults() Config {
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = 16 << 20
	}
	if c.InlineBytes <= 0 {
		c.InlineBytes = 512 << 10
	}
	if c.MaxBatchEvents <= 0 {
		c.MaxBatchEvents = 1000
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 17 << 20
	}
	c.MaxBodyBytes = max(c.MaxBodyBytes, int64(c.MaxEventBytes)+1<<10)
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = 30 * time.Second
	}
	if c.MaxBodies <= 0 {
		c.MaxBodies = 16
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = 10 * time.Second
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 8192
	}
	if c.APITimeout <= 0 {
		c.APITimeout = 120 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	return c
}
