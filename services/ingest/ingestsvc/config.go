// Package ingestsvc is Recall's ingest service: the HTTP edge (POST
// /v1/events and the session API) and the NATS ingest endpoint. It validates
// CloudEvents, stamps the authenticated tenant, and answers only after
// JetStream stored the event.
//
// Shutdown, when the context given to Run is done, follows the one order
// of docs/architecture.md#shutdown; ingest's own steps in it are the erase
// guard and the retention sweeper, and its further connections (the
// endpoint's, the console's reads, the eraser's) drain before the
// publishing one. A clean stop returns nil, and so does a stop while
// starting.
package ingestsvc

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/internal/llm/prices"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
)

// Config configures the ingest service (environment variables RECALL_*).
type Config struct {
	NATS natsconn.Config
	provision.Config
	HTTPAddr string `envconfig:"HTTP_ADDR" default:"127.0.0.1:8080" desc:"HTTP edge listen address (an empty address serves no HTTP)"`
	// Tenants lists "tenant:sha256hex" pairs, comma separated. Empty means a
	// single tenant "default" without authentication (localhost use only).
	// Tenants and OperatorTokens hold hashes of bearer tokens, not the
	// tokens: they grant nothing by themselves, but a weak token can be
	// found from its hash offline, so they are logged masked.
	Tenants        string        `envconfig:"TENANTS" secret:"true" desc:"bearer tokens per tenant as tenant:sha256(token) hex, comma separated; empty = single tenant 'default' without auth (secret)"`
	OperatorTokens string        `envconfig:"OPERATOR_TOKENS" secret:"true" desc:"console operator tokens as sha256(token) hex, comma separated: they see every tenant and may replay parked extractions (secret)"`
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
	// Prices prices the extractions the console shows. It is the
	// indexer's variable (the same key, default and description, so
	// `recall config` lists it once, shared): an operator sets
	// RECALL_INDEX_PRICES once and the console's costs agree with the
	// indexer's.
	Prices string `envconfig:"INDEX_PRICES" desc:"USD per million input:output tokens by model, e.g. \"claude-haiku-4-5=1:5,gpt-4o-mini=0.15:0.6\" (added to the built-in table)"`
	// TenantMax are the ceilings of what a tenant may configure
	// (RECALL_TENANT_MAX_*): the configuration API refuses a value over
	// one.
	TenantMax tenantcfg.Ceilings `envconfig:"TENANT_MAX"`
	// Erase configures the erase of sessions and users (RECALL_ERASE_*).
	Erase erase.Config
	// Retention configures the sweeper of tenants' retention
	// (RECALL_RETENTION_*; an interval of 0 runs none). The environment's
	// default interval is 10m; a Config literal runs none unless it sets
	// one.
	Retention erase.SweepConfig
}

// LogValue masks the token hashes.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// withDefaults fills unset values from their tags (internal/envconf), so
// tests may build a Config literal, and derives the rest: the body limit
// holds one event of the largest size.
func (c Config) withDefaults() Config {
	retention := c.Retention
	envconf.Defaults(&c)
	c.Retention = retention // a literal's zero interval runs no sweeper
	c.MaxBodyBytes = max(c.MaxBodyBytes, int64(c.MaxEventBytes)+1<<10)
	return c
}

// priceTable is the console's price table: RECALL_INDEX_PRICES over the
// built-in one. Its error names the variable and the entry at fault.
func (c Config) priceTable() (prices.Table, error) {
	t, err := prices.Parse(c.Prices)
	if err != nil {
		return nil, fmt.Errorf("RECALL_INDEX_PRICES: %w", err)
	}
	return t, nil
}
