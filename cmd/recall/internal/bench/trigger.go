package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// benchThresholds makes the generated conversations cross the trigger's
// thresholds within four messages (user, tool call, tool result, answer),
// so the trigger decides and publishes requests (pipeline scenario). The
// trigger scenario keeps the default thresholds: it measures decisions.
var benchThresholds = events.TenantConfig{MinimumMessageTokensToInit: 3000, MinimumTokensBetweenUpdate: 1000, ToolCallsBetweenUpdates: 3}

// scalingReplicas are the replica counts of trigger.replicas_scaling.
var scalingReplicas = []int{1, 2, 4}

func runTrigger(ctx context.Context, e *env) error {
	r := &e.res.Trigger
	sessions := benchgen.SessionIDs("t", e.sizes.triggerSessions)
	plan := fillPlan{sessions: sessions, counts: make([]int, len(sessions))}
	for i := range plan.counts {
		plan.counts[i] = e.sizes.triggerPerSession
	}
	t0 := time.Now()
	gen := benchgen.New(3)
	last, err := e.fill(ctx, gen, plan, nil)
	if err != nil {
		return err
	}
	n := plan.total()
	r.Events = n
	e.progress("   pre-filled %d sessions, %d events in %d shards in %s", len(sessions), n, len(last), time.Since(t0).Round(time.Millisecond))
	cfg := triggersvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig()}

	// One unmeasured read first: right after the fill the server is
	// still writing its blocks out, and whichever phase came first would
	// pay for it; after one read both measured phases find the same
	// settled server.
	if _, _, _, err := rawAckConsume(ctx, e, cfg, last); err != nil {
		return err
	}
	wall, cpu, cpuOK, err := rawAckConsume(ctx, e, cfg, last)
	if err != nil {
		return err
	}
	r.RawConsumeMsgsPerS = f64(round1(rate(n, wall)))
	r.RawCPUUSPerEvent = cpuPerEvent(cpu, cpuOK, n)
	e.progress("   raw consumer acknowledging like the trigger: %.0f msgs/s, %.2f µs CPU per event", *r.RawConsumeMsgsPerS, deref(r.RawCPUUSPerEvent))

	if err := triggerThroughput(ctx, e, cfg, last, len(sessions)); err != nil {
		return err
	}
	if err := triggerRecovery(ctx, e, cfg, gen, sessions); err != nil {
		return err
	}
	if err := triggerScaling(ctx, e, cfg); err != nil {
		return err
	}
	return triggerLongSession(ctx, e, cfg)
}

// triggerThroughput runs one trigger replica over the pre-filled
// transcript (records up to last) and measures its rate, its CPU per
// event, its memory per session and the requests it published.
func triggerThroughput(ctx context.Context, e *env, cfg triggersvc.Config, last shardSeqs, sessions int) error {
	r := &e.res.Trigger
	n := int(last.total())
	p := startPhase()
	rs, err := startTriggerReplicas(ctx, e, cfg, 1, "bench-throughput")
	if err != nil {
		return err
	}
	defer stopReplicas(rs)
	first, err := waitProcessed(ctx, rs, int64(n))
	if err != nil {
		return err
	}
	_, end, err := e.waitAcked(ctx, events.DurableTrigger, last, services(rs)...)
	if err != nil {
		return err
	}
	_, cpu, cpuOK := p.end()
	r.EventsPerS = f64(round1(rate(n, end.Sub(first))))
	r.RatioVsRawConsume = ratio(r.EventsPerS, r.RawConsumeMsgsPerS)
	r.CPUUSPerEvent = cpuPerEvent(cpu, cpuOK, n)
	r.CPURatioVsRaw = ratio(r.CPUUSPerEvent, r.RawCPUUSPerEvent)
	r.Sessions = ptrInt(sessions)
	if s, err := e.js.Stream(ctx, events.StreamExtract); err == nil {
		r.Requests = int(s.CachedInfo().State.Msgs)
	}
	// The live heap with every session held, less the live heap a moment
	// later once the replica stopped and dropped them: the embedded server
	// shares the heap, and its block caches (eight shards being read or
	// written) change over seconds, so a heap taken before the replica
	// started, with the fill's caches, is not comparable.
	with := heapInUse()
	stopReplicas(rs)
	without := heapInUse()
	r.BytesPerSession = f64(round1(float64(int64(with)-int64(without)) / float64(sessions)))
	e.progress("   trigger: %.0f events/s (%.2f x raw consume), %.2f µs CPU per event (%.2f x raw), %.0f bytes/session, %d extraction requests",
		*r.EventsPerS, deref(r.RatioVsRawConsume), deref(r.CPUUSPerEvent), deref(r.CPURatioVsRaw), *r.BytesPerSession, r.Requests)
	return nil
}

// triggerRecovery restarts the trigger after one new record per session:
// every session is rebuilt from its transcript before its record counts.
func triggerRecovery(ctx context.Context, e *env, cfg triggersvc.Config, gen *benchgen.Gen, sessions []string) error {
	plan := fillPlan{sessions: sessions, counts: make([]int, len(sessions))}
	for i := range plan.counts {
		plan.counts[i] = 1
	}
	last, err := e.fill(ctx, gen, plan, nil) // gen continues the conversations
	if err != nil {
		return err
	}
	p := startPhase()
	started := time.Now()
	svc, err := startService(ctx, "trigger", func(ctx context.Context) error {
		return triggersvc.Run(ctx, cfg, e.log.With("service", "trigger"))
	}, nil)
	if err != nil {
		return err
	}
	defer svc.stop()
	_, end, err := e.waitAcked(ctx, events.DurableTrigger, last, svc)
	if err != nil {
		return err
	}
	r := &e.res.Trigger
	r.RestartRecoveryS = f64(round1(end.Sub(started).Seconds()*100) / 100)
	if _, cpu, ok := p.end(); ok {
		r.RestartRecoveryCPUS = f64(round1(cpu.Seconds()*100) / 100)
	}
	e.progress("   restart recovery: %d sessions back in %.2f s (%.2f s of CPU)", len(sessions), *r.RestartRecoveryS, deref(r.RestartRecoveryCPUS))
	return nil
}

// triggerScaling runs 1, 2 and 4 trigger replicas over the whole
// transcript from its start and records, for each, the share of the
// records the busiest replica received: the replicas share the shards, so
// each receives only its shards' records.
func triggerScaling(ctx context.Context, e *env, cfg triggersvc.Config) error {
	last, err := e.lastSeqs(ctx)
	if err != nil {
		return err
	}
	stored, err := e.storedRecords(ctx)
	if err != nil {
		return err
	}
	for _, replicas := range scalingReplicas {
		step, err := scalingStep(ctx, e, cfg, replicas, last, stored)
		if err != nil {
			return fmt.Errorf("%d replicas: %w", replicas, err)
		}
		e.res.Trigger.ReplicasScaling = append(e.res.Trigger.ReplicasScaling, step)
		e.progress("   %d replica(s) over %d shards: the busiest received %d of %d records (%.3f), %.0f events/s in %.2f s, %.2f µs CPU per event",
			replicas, step.Shards, step.DeliveredMost, stored, step.DeliveredFraction, step.EventsPerS, step.Seconds, deref(step.CPUUSPerEvent))
	}
	return nil
}

// scalingStep is one replica count of triggerScaling.
func scalingStep(ctx context.Context, e *env, cfg triggersvc.Config, replicas int, last shardSeqs, stored uint64) (ReplicaStep, error) {
	// Without the durables every replica count reads the transcript from
	// its start.
	e.deleteDurable(ctx, events.DurableTrigger)
	p := startPhase()
	rs, err := startTriggerReplicas(ctx, e, cfg, replicas, fmt.Sprintf("bench-%d", replicas))
	if err != nil {
		return ReplicaStep{}, err
	}
	defer stopReplicas(rs)
	first, err := waitProcessed(ctx, rs, int64(stored))
	if err != nil {
		return ReplicaStep{}, err
	}
	_, end, err := e.waitAcked(ctx, events.DurableTrigger, last, services(rs)...)
	if err != nil {
		return ReplicaStep{}, err
	}
	_, cpu, cpuOK := p.end()
	_, most := delivered(rs)
	d := end.Sub(first)
	return ReplicaStep{
		Replicas: replicas, Shards: e.layout().Shards(), Records: int64(stored), DeliveredMost: most,
		DeliveredFraction: round3(float64(most) / float64(stored)),
		EventsPerS:        round1(rate(int(stored), d)), Seconds: round1(d.Seconds()*100) / 100,
		CPUUSPerEvent: cpuPerEvent(cpu, cpuOK, int(stored)),
	}, nil
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
