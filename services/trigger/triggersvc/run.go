// Package triggersvc is Recall's trigger service. It follows every
// session's transcript (durable consumer events.DurableTrigger on
// RECALL_TRANSCRIPT), decides with memory.TriggerState when a session's
// memory should be refreshed, and publishes extraction.requested events to
// RECALL_EXTRACT (deduplicated by tenant:session:up_to_seq) and
// RECALL_EVENTS. It also serves manual extraction on
// recall.api.extract.<tenant>.<session>.
//
// Decisions are a pure function of a session's transcript and the
// configuration, so state is rebuilt from the transcript after a restart,
// an eviction or a failover, and a re-emitted decision is stored once. A
// record is acknowledged only after every decision it caused is stored.
// Replicas run active/standby on a pinned priority group, or share session
// partitions (Config.TriggerPartitions); see docs/trigger.md.
//
// Shutdown, when the context given to Run is done: the consumers stop
// delivering, publications are awaited (at most 5 s) and what they cover is
// acknowledged, the pins are released so another replica takes over at
// once (2 s), the manual endpoint stops and the connection drains (2 s). A
// clean stop returns nil.
package triggersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/ops"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
)

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg = cfg.WithDefaults()
	nc, js, err := provision.Open(ctx, cfg.NATS, cfg.Config, "recall-trigger", log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer nc.Close()
	tenants, err := tenantcfg.Watch(ctx, js, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watching tenant configuration: %w", err)
	}
	t, err := New(nc, cfg, tenants, log)
	if err != nil {
		return err
	}
	svc, err := t.ServeManual(ctx)
	if err != nil {
		return fmt.Errorf("starting %s micro service: %w", ServiceName, err)
	}
	opsDone := make(chan error, 1)
	go func() {
		opsDone <- ops.Serve(ctx, cfg.OpsAddr, ops.Handler(func() error {
			if !nc.IsConnected() {
				return errors.New("NATS disconnected")
			}
			if !t.Ready() {
				return errors.New("not consuming yet")
			}
			return nil
		}), log)
	}()
	log.InfoContext(ctx, "trigger running", "thresholds", cfg.Thresholds(), "max_sessions", cfg.MaxSessions,
		"partitions", cfg.TriggerPartitions, "member", cfg.MemberID)
	runErr := t.Run(ctx)
	_ = svc.Stop()
	if err := <-opsDone; err != nil {
		log.Warn("operational endpoints", "err", err)
	}
	// Bounded: Run returned within ~7 s (5 s for publications, 2 s to
	// unpin), the drain adds at most 2 s.
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err == nil {
		select {
		case <-closed:
		case <-dctx.Done():
		}
	}
	return runErr
}
