// Package ingestsvc is Recall's ingest service: the HTTP edge (POST
// /v1/events and the session API) and the NATS ingest endpoint. It validates
// CloudEvents, stamps the authenticated tenant, and answers only after
// JetStream stored the event.
//
// Shutdown, when the context given to Run is done: the HTTP listener closes
// and in-flight HTTP requests finish (their acks included), the micro
// service stops and in-flight NATS requests are answered, then the NATS
// connections (publishing, the endpoint, the console's reads) drain. A
// clean stop returns nil.
package ingestsvc

import (
	"log/slog"
	"time"

	"github.com/recallhq/recall/internal/erase"
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
	MaxBodies      int           `envconfig:"INGEST_MAX_BODIES" default:"16" desc:"most small HTTP request bodies (at most INGEST_LARGE_BODY_BYTES) read at once (503 with Retry-After beyond)"`
	TenantBodies   int           `envconfig:"INGEST_TENANT_BODIES" default:"8" desc:"most small HTTP request bodies one tenant has read at once (429 with Retry-After beyond)"`
	LargeBodyBytes int64         `envconfig:"INGEST_LARGE_BODY_BYTES" default:"1048576" desc:"bodies announced larger than this, or of unknown length, take a large-body slot"`
	MaxLargeBodies int           `envconfig:"INGEST_MAX_LARGE_BODIES" default:"4" desc:"most large HTTP request bodies read at once (503 beyond); with INGEST_MAX_BODY_BYTES it bounds the edge's body memory"`
	TenantLarge    int           `envconfig:"INGEST_TENANT_LARGE_BODIES" default:"2" desc:"most large HTTP request bodies one tenant has read at once (429 beyond)"`
	MaxCalls       int           `envconfig:"INGEST_MAX_CALLS" default:"16" desc:"most expensive calls (extract, compact, edit, query, resolve, reindex, commit, listings, console reads) the edge works on at once (503 beyond)"`
	TenantCalls    int           `envconfig:"INGEST_TENANT_CALLS" default:"4" desc:"most expensive calls of one tenant at once (429 with Retry-After beyond)"`
	MaxReads       int           `envconfig:"INGEST_MAX_READS" default:"256" desc:"most small reads (GET memory, GET index) at once (503 beyond)"`
	TenantReads    int           `envconfig:"INGEST_TENANT_READS" default:"64" desc:"most small reads of one tenant at once (429 beyond)"`
	TenantInFlight int           `envconfig:"INGEST_TENANT_IN_FLIGHT" default:"256" desc:"most NATS ingest requests of one tenant awaiting acknowledgements (429 beyond; 1,024 in all)"`
	MaxConns       int           `envconfig:"INGEST_MAX_CONNS" default:"2048" desc:"most open HTTP connections; further ones wait in the listen backlog"`
	MaxConnsPerIP  int           `envconfig:"INGEST_MAX_CONNS_PER_IP" default:"256" desc:"most open HTTP connections from one client IP; more are closed at once"`
	HeaderTimeout  time.Duration `envconfig:"INGEST_HEADER_TIMEOUT" default:"10s" desc:"longest time to receive a request's headers"`
	IdleTimeout    time.Duration `envconfig:"INGEST_IDLE_TIMEOUT" default:"60s" desc:"how long an idle keep-alive HTTP connection is kept"`
	PublishTimeout time.Duration `envconfig:"INGEST_PUBLISH_TIMEOUT" default:"10s" desc:"how long to wait for JetStream to acknowledge an event"`
	MaxPending     int           `envconfig:"INGEST_MAX_PENDING" default:"8192" desc:"most unacknowledged async publishes before publishing stalls"`
	APITimeout     time.Duration `envconfig:"INGEST_API_TIMEOUT" default:"120s" desc:"how long the HTTP session API waits for a NATS reply"`
	ShutdownGrace  time.Duration `envconfig:"INGEST_SHUTDOWN_GRACE" default:"30s" desc:"how long shutdown waits for in-flight requests"`
	// Erase configures the erase of sessions and users (RECALL_ERASE_*).
	Erase erase.Config
	// Retention configures the sweeper of tenants' retention
	// (RECALL_RETENTION_*; an interval of 0 runs none).
	Retention erase.SweepConfig
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
		slog.Int("tenant_bodies", c.TenantBodies),
		slog.Int64("large_body_bytes", c.LargeBodyBytes),
		slog.Int("max_large_bodies", c.MaxLargeBodies),
		slog.Int("tenant_large_bodies", c.TenantLarge),
		slog.Int("max_calls", c.MaxCalls),
		slog.Int("tenant_calls", c.TenantCalls),
		slog.Int("max_reads", c.MaxReads),
		slog.Int("tenant_reads", c.TenantReads),
		slog.Int("tenant_in_flight", c.TenantInFlight),
		slog.Int("max_conns", c.MaxConns),
		slog.Int("max_conns_per_ip", c.MaxConnsPerIP),
		slog.Duration("header_timeout", c.HeaderTimeout),
		slog.Duration("idle_timeout", c.IdleTimeout),
		slog.Duration("publish_timeout", c.PublishTimeout),
		slog.Int("partitions", c.Partitions),
		slog.Int("replicas", c.Replicas),
		slog.Duration("erase_tombstone_ttl", c.Erase.TombstoneTTL),
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
	c = c.admissionDefaults()
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

// admissionDefaults fills the zero bounds of admission and connections.
func (c Config) admissionDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxBodies, 16)
	def(&c.TenantBodies, 8)
	def(&c.MaxLargeBodies, 4)
	def(&c.TenantLarge, 2)
	def(&c.MaxCalls, 16)
	def(&c.TenantCalls, 4)
	def(&c.MaxReads, 256)
	def(&c.TenantReads, 64)
	def(&c.TenantInFlight, 256)
	def(&c.MaxConns, 2048)
	def(&c.MaxConnsPerIP, 256)
	if c.LargeBodyBytes <= 0 {
		c.LargeBodyBytes = 1 << 20
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	return c
}
