// Package longtermsvc is Recall's long-term memory: memory documents per
// user (self) and per peer that outlive sessions, written by commits of a
// session's batches — at its end, at each compaction it reports, and on
// request — under the session's memory policy, by a forked model that may
// read the user's memory space and the batch and write only inside the
// permitted part of it. See docs/long-term-memory.md.
//
// The replicas share the transcript's shards (internal/shardgroup,
// membership in RECALL_LTM_FOLLOWERS), each reading only its own, and
// queue a commit request per commit point on RECALL_COMMITS, keyed by
// user; the replicas share that stream's partitions (a partitioned
// consumer group), so commits spread over the replicas by user and run one
// at a time per user, in order. Explicit commits run on the replica asked;
// a lease per user keeps them apart from queued ones. Every replica serves
// the API.
package longtermsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg = cfg.withDefaults()
	provider := cfg.Provider
	if provider == nil {
		lc := cfg.LLMConfig
		if cfg.Model != "" {
			lc.Model = cfg.Model
		}
		p, err := llm.New(lc, log)
		if err != nil {
			return err
		}
		provider = p
	}
	life, err := lifecycle.Start(ctx, lifecycle.Config{Name: ServiceName, NATS: cfg.NATS, Provision: cfg.Config, OpsAddr: cfg.OpsAddr}, log)
	if errors.Is(err, lifecycle.ErrStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	defer life.Stop()
	var ltm, state jetstream.KeyValue
	err = provision.Startup.Do(ctx, log, "opening "+events.BucketLTM, func(ctx context.Context) (err error) {
		if ltm, err = life.JS.KeyValue(ctx, events.BucketLTM); err != nil {
			return err
		}
		state, err = life.JS.KeyValue(ctx, events.BucketLTMState)
		return err
	})
	if err != nil {
		return nil // stopped while starting
	}
	tenants, err := tenantcfg.Watch(ctx, life.JS, log)
	if err != nil {
		return nil
	}
	c := &committer{ltm: ltm, state: state, reader: transcript.NewReader(life.NC, cfg.Layout()), tenants: tenants, provider: provider,
		pub: eventpub.New(life.JS, "longterm"), cfg: cfg, log: log, m: newMetrics(), holder: cfg.ID,
		slots: make(chan struct{}, cfg.Concurrency)}
	svc, later, err := c.serve(ctx, life.NC, log)
	if err != nil {
		return fmt.Errorf("adding the micro service: %w", err)
	}
	life.Adopt(svc)
	life.Await(later)
	group, err := c.newGroup(life.JS)
	if err != nil {
		return err
	}
	k, err := newConsumer(c, life.JS)
	if err != nil {
		return err
	}
	life.SetReady(func() error {
		if !k.group.Joined() {
			return errors.New("not a member of the transcript's shard group yet")
		}
		if !slices.Contains(group.Members(), cfg.ID) {
			return errors.New("not a member of the commit group yet")
		}
		return nil
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		// Run hands the partitions over on stop (running commits get the
		// group's drain time).
		_ = provision.Startup.Do(ctx, log, "joining the commit group", func(context.Context) error { return group.Run(ctx) })
	})
	err = k.group.Run(ctx)
	wg.Wait()
	return err
}
