package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	e.progress("   pre-filled %d sessions, %d events in %s", len(sessions), n, time.Since(t0).Round(time.Millisecond))

	d, err := consumeAll(ctx, e.js, events.StreamTranscript, uint64(n))
	if err != nil {
		return err
	}
	r.RawConsumeMsgsPerS = f64(round1(rate(n, d)))
	e.progress("   raw consume of the same transcript: %.0f msgs/s", *r.RawConsumeMsgsPerS)

	heapBefore := heapInUse()
	cfg := triggersvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig()}
	started := time.Now()
	svc, err := startService(ctx, "trigger", func(ctx context.Context) error {
		return triggersvc.Run(ctx, cfg, e.log.With("service", "trigger"))
	}, consumerReady(e.js, events.StreamTranscript, events.DurableTrigger))
	if err != nil {
		return err
	}
	defer svc.stop()
	first, end, err := waitConsumed(ctx, e.js, events.StreamTranscript, events.DurableTrigger, last, svc)
	if err != nil {
		return err
	}
	e.progress("   trigger started pulling %s after start", first.Sub(started).Round(time.Millisecond))
	r.EventsPerS = f64(round1(rate(n, end.Sub(first))))
	r.RatioVsRawConsume = ratio(r.EventsPerS, r.RawConsumeMsgsPerS)
	r.Sessions = ptrInt(len(sessions))
	heapAfter := heapInUse()
	r.BytesPerSession = f64(round1(float64(int64(heapAfter)-int64(heapBefore)) / float64(len(sessions))))
	if s, err := e.js.Stream(ctx, events.StreamExtract); err == nil {
		r.Requests = int(s.CachedInfo().State.Msgs)
	}
	e.progress("   trigger: %.0f events/s (%.2f x raw consume), %.0f bytes/session, %d extraction requests",
		*r.EventsPerS, deref(r.RatioVsRawConsume), *r.BytesPerSession, r.Requests)
	if err := svc.stop(); err != nil {
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
	started := time.Now()
	svc, err := startService(ctx, "trigger", func(ctx context.Context) error {
		return triggersvc.Run(ctx, cfg, e.log.With("service", "trigger"))
	}, nil)
	if err != nil {
		return err
	}
	defer svc.stop()
	_, end, err := waitConsumed(ctx, e.js, events.StreamTranscript, events.DurableTrigger, last, svc)
	if err != nil {
		return err
	}
	e.res.Trigger.RestartRecoveryS = f64(round1(end.Sub(started).Seconds()*100) / 100)
	e.progress("   restart recovery: %d sessions back in %.2f s", len(sessions), *e.res.Trigger.RestartRecoveryS)
	return nil
}

// triggerScaling runs the partitioned trigger over the whole transcript
// from scratch with 1, 2 and 3 replicas.
func triggerScaling(ctx context.Context, e *env, cfg triggersvc.Config) error {
	s, err := e.js.Stream(ctx, events.StreamTranscript)
	if err != nil {
		return err
	}
	last := s.CachedInfo().State.LastSeq
	for replicas := 1; replicas <= 3; replicas++ {
		// One partition per replica: every replica receives the transcript
		// once and processes its share of the sessions.
		partitions := replicas
		// No trigger durables left: every replica count reads the
		// transcript from its start (a new partition durable starts at the
		// lowest position of the existing ones).
		_ = e.js.DeleteConsumer(ctx, events.StreamTranscript, events.DurableTrigger)
		for n := 1; n < partitions; n++ {
			for p := range n {
				_ = e.js.DeleteConsumer(ctx, events.StreamTranscript, events.TriggerDurable(p, n))
			}
		}
		start := time.Now()
		svcs, err := startTriggers(ctx, e, cfg, replicas, fmt.Sprintf("bench-%d", replicas))
		if err != nil {
			return err
		}
		var end time.Time
		for p := range partitions {
			_, pend, err := waitConsumed(ctx, e.js, events.StreamTranscript, events.TriggerDurable(p, partitions), last, svcs[0])
			if err != nil {
				return err
			}
			if pend.After(end) {
				end = pend
			}
		}
		for _, svc := range svcs {
			_ = svc.stop()
		}
		d := end.Sub(start)
		step := ReplicaStep{Replicas: replicas, Partitions: partitions, EventsPerS: round1(rate(int(last), d)), Seconds: round1(d.Seconds()*100) / 100}
		e.res.Trigger.ReplicasScaling = append(e.res.Trigger.ReplicasScaling, step)
		e.progress("   partitioned trigger, %d replica(s): %.0f events/s (%d records in %.2f s)", replicas, step.EventsPerS, last, step.Seconds)
	}
	return nil
}

// consumerReady is a readiness check: the durable consumer exists.
func consumerReady(js jetstream.JetStream, stream, durable string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := js.Consumer(ctx, stream, durable)
		return err
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// waitConsumed polls the durable consumer until its ack floor reaches last.
// It returns when the consumer first had delivered messages and when it had
// acknowledged everything.
func waitConsumed(ctx context.Context, js jetstream.JetStream, stream, durable string, last uint64, svc *service) (first, end time.Time, err error) {
	deadline := time.Now().Add(5 * time.Minute)
	var lastInfo *jetstream.ConsumerInfo
	for time.Now().Before(deadline) {
		select {
		case <-svc.done:
			return first, end, fmt.Errorf("the %s service stopped: %v", svc.name, svc.err)
		case <-ctx.Done():
			return first, end, ctx.Err()
		default:
		}
		c, err := js.Consumer(ctx, stream, durable)
		if err == nil {
			info := c.CachedInfo()
			lastInfo = info
			now := time.Now()
			if first.IsZero() && info.Delivered.Stream > 0 {
				first = now
			}
			if info.AckFloor.Stream >= last {
				return first, now, nil
			}
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return first, end, fmt.Errorf("reading consumer %s: %w", durable, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lastInfo != nil {
		return first, end, fmt.Errorf("consumer %s acknowledged up to %d of %d within 5m (delivered %d)", durable, lastInfo.AckFloor.Stream, last, lastInfo.Delivered.Stream)
	}
	return first, end, fmt.Errorf("consumer %s did not appear within 5m", durable)
}
