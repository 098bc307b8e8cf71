// Package indexersvc is Recall's session index: a name, description,
// summary and tags for every session (indexed by a cheap model at turn ends
// and session ends), references to past sessions by id or name, and
// questions to a past session. See docs/sessions.md.
//
// The replicas share the transcript's shards (internal/shardgroup): each
// reads only the shards it owns; every replica serves the API.
package indexersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
)

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg = cfg.withDefaults()
	prices, err := parsePrices(cfg.Prices)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	life, err := lifecycle.Start(ctx, lifecycle.Config{Name: ServiceName, NATS: cfg.NATS, Provision: cfg.Config, OpsAddr: cfg.OpsAddr}, log)
	if errors.Is(err, lifecycle.ErrStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	defer life.Stop()
	// Transcript reads get their own connection (reads); it closes before
	// the service's connection drains, once ctx has ended every request.
	rnc, err := natsconn.ConnectLogged(cfg.NATS, ServiceName+"-reads", log)
	if err != nil {
		return fmt.Errorf("connecting the transcript reads: %w", err)
	}
	defer rnc.Close()
	x, err := open(ctx, life.NC, life.JS, newReads(rnc, cfg.Layout(), cfg.ReadBatch), cfg, prices, log)
	if err != nil {
		return nil // ctx is done: stopped while starting
	}
	svc, later, err := x.serve(ctx, log)
	if err != nil {
		return fmt.Errorf("adding the micro service: %w", err)
	}
	life.Adopt(svc)
	life.Await(later)
	c, err := newConsumer(x, life.JS)
	if err != nil {
		return err
	}
	life.SetReady(func() error {
		if !c.group.Joined() {
			return errors.New("not a member of the indexers' shard group yet")
		}
		return nil
	})
	return c.run(ctx)
}

// open builds the indexer over the provisioned buckets. A provider that
// cannot be built disables indexing with a warning; the rest serves.
func open(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, rd *reads, cfg Config, prices map[string]price, log *slog.Logger) (*Indexer, error) {
	var kv, mkv jetstream.KeyValue
	err := provision.Startup.Do(ctx, log, "opening "+events.BucketIndex, func(ctx context.Context) (err error) {
		if kv, err = js.KeyValue(ctx, events.BucketIndex); err != nil {
			return err
		}
		mkv, err = js.KeyValue(ctx, events.BucketMemory)
		return err
	})
	if err != nil {
		return nil, err
	}
	tenants, err := tenantcfg.Watch(ctx, js, log)
	if err != nil {
		return nil, err
	}
	x := &Indexer{
		nc: nc, entries: &entries{kv: kv, log: log}, mem: store.NewMemory(mkv), reader: rd,
		tenants: tenants, pub: eventpub.New(js, "indexer"), cfg: cfg, log: log, m: newMetrics(), prices: prices,
		slots: make(chan struct{}, cfg.Concurrency), sessions: map[string]*counter{}, holder: holderName(),
		admit: microapi.NewAdmission(cfg.TenantRequests, cfg.Requests, time.Second),
	}
	x.provider, x.disabled = indexProvider(cfg, log)
	return x, nil
}

// indexProvider builds the indexing model, or returns why indexing is off.
func indexProvider(cfg Config, log *slog.Logger) (llm.Provider, string) {
	if cfg.Provider != nil {
		return cfg.Provider, ""
	}
	lc := cfg.LLMConfig
	if cfg.IndexModel != "" {
		lc.Model = cfg.IndexModel
	}
	p, err := llm.New(lc, log)
	if err != nil {
		reason := strings.TrimPrefix(err.Error(), "creating llm provider: ")
		log.Warn("session indexing is disabled: the indexing model cannot be configured; the rest of Recall keeps running", "err", err)
		return nil, reason
	}
	return p, ""
}

// holderName names this replica in indexing leases.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
