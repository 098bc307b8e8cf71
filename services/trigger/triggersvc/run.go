// Package triggersvc is Recall's trigger service. It follows every
// session's transcript (durable consumer events.DurableTrigger on every
// shard stream), decides with memory.TriggerState when a session's
// memory should be refreshed, and publishes extraction.requested events to
// RECALL_EXTRACT (deduplicated by tenant:session:up_to_seq) and
// RECALL_EVENTS. It also serves manual extraction on
// recall.api.extract.<tenant>.<session>.
//
// Decisions are a pure function of a session's transcript and the
// configuration, so state is rebuilt from the transcript after a restart,
// an eviction or a failover, and a re-emitted decision is stored once. A
// record is acknowledged only after every decision it caused is stored.
// Replicas share the transcript's shards (a consumer group in
// RECALL_TRIGGERS, each shard read by one replica); see docs/trigger.md.
//
// Shutdown, when the context given to Run is done: the consumers stop
// delivering, publications are awaited (at most 5 s) and what they cover is
// acknowledged, the pins are released so another replica takes over at
// once (2 s), then internal/lifecycle stops the manual endpoint, waits for
// the manual extractions it was answering (cancelled with ctx, they answer
// 503 at once), stops the operational endpoints and drains the connection
// (bounded). A clean stop returns nil.
package triggersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/tenantcfg"
)

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg = cfg.WithDefaults()
	life, err := lifecycle.Start(ctx, lifecycle.Config{Name: "recall-trigger", NATS: cfg.NATS, Provision: cfg.Config, OpsAddr: cfg.OpsAddr}, log)
	if errors.Is(err, lifecycle.ErrStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	// Bounded: Run returns within ~7 s (5 s for publications, 2 s to
	// unpin); Stop adds at most lifecycle.DrainTimeout.
	defer life.Stop()
	tenants, err := tenantcfg.Watch(ctx, life.JS, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watching tenant configuration: %w", err)
	}
	t, err := New(life.NC, cfg, tenants, log)
	if err != nil {
		return err
	}
	svc, later, err := t.ServeManual(ctx)
	if err != nil {
		return fmt.Errorf("starting %s micro service: %w", ServiceName, err)
	}
	life.Adopt(svc)
	life.Await(later)
	life.SetReady(func() error {
		if !t.Ready() {
			return errors.New("not consuming yet")
		}
		return nil
	})
	log.InfoContext(ctx, "trigger running", "thresholds", cfg.Thresholds(), "max_sessions", cfg.MaxSessions,
		"shards", cfg.Layout().Shards(), "member", cfg.MemberID)
	return t.Run(ctx)
}
