package bench

import (
	"context"
	"time"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// LongRebuild is the rebuild of one long session's trigger state when its
// next record arrives after a restart without the warm start, as after an
// idle eviction or a shard move: with snapshots of its state
// (RECALL_TRIGGER_SNAPSHOT_EVERY) and without.
type LongRebuild struct {
	Records       int `json:"records"`
	SnapshotEvery int `json:"snapshot_every"` // -1: no snapshots, the whole session is replayed
	// MS runs from the next record's publication, the restarted trigger
	// already following its shards (its group join is not counted), to
	// that record's acknowledgement.
	MS float64 `json:"ms"`
}

// triggerLongSession measures LongRebuild for one session of
// longSessionRecords records, without and with snapshots, each on a fresh
// transcript.
func triggerLongSession(ctx context.Context, e *env, base triggersvc.Config) error {
	for _, every := range []int{-1, base.WithDefaults().SnapshotEvery} {
		if err := e.reset(ctx); err != nil {
			return err
		}
		n, gen := e.sizes.longSessionRecords, benchgen.New(19)
		plan := fillPlan{sessions: []string{"long-t"}, counts: []int{n}}
		last, err := e.fill(ctx, gen, plan, nil)
		if err != nil {
			return err
		}
		cfg := base
		cfg.WarmStartRecords, cfg.SnapshotEvery = -1, every
		if _, err := runTriggerUntil(ctx, e, cfg, last); err != nil { // follows the session, storing snapshots
			return err
		}
		plan.counts[0] = 1
		d, err := rebuildOnNextRecord(ctx, e, cfg, gen, plan)
		if err != nil {
			return err
		}
		r := LongRebuild{Records: n, SnapshotEvery: every, MS: round1(float64(d) / float64(time.Millisecond))}
		e.res.Trigger.LongSessionRebuild = append(e.res.Trigger.LongSessionRebuild, r)
		e.progress("   a %d-record session rebuilt after a restart (%s): %.0f ms", n, snapshotsNote(every), r.MS)
	}
	return nil
}

// rebuildOnNextRecord starts a trigger replica with cfg, waits until it
// follows every shard, stores plan's records and returns the time from
// their publication to their acknowledgement.
func rebuildOnNextRecord(ctx context.Context, e *env, cfg triggersvc.Config, gen *benchgen.Gen, plan fillPlan) (time.Duration, error) {
	rs, err := startTriggerReplicas(ctx, e, cfg, 1, "bench-long")
	if err != nil {
		return 0, err
	}
	defer stopReplicas(rs)
	start := time.Now()
	last, err := e.fill(ctx, gen, plan, nil)
	if err != nil {
		return 0, err
	}
	_, end, err := e.waitAcked(ctx, events.DurableTrigger, last, services(rs)...)
	if err != nil {
		return 0, err
	}
	return end.Sub(start), nil
}

// runTriggerUntil starts the trigger with cfg, waits until its durable has
// acknowledged record last[k] of every shard k and stops it; it returns
// the time from the start to that acknowledgement.
func runTriggerUntil(ctx context.Context, e *env, cfg triggersvc.Config, last shardSeqs) (time.Duration, error) {
	started := time.Now()
	svc, err := startService(ctx, "trigger", func(ctx context.Context) error {
		return triggersvc.Run(ctx, cfg, e.log.With("service", "trigger"))
	}, nil)
	if err != nil {
		return 0, err
	}
	defer svc.stop()
	_, end, err := e.waitAcked(ctx, events.DurableTrigger, last, svc)
	if err != nil {
		return 0, err
	}
	return end.Sub(started), svc.stop()
}
