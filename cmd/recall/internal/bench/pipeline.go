package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// pipelineTick is the pacing interval of the steady ingest.
const pipelineTick = 10 * time.Millisecond

// pipelineReplicas is how many partitioned trigger replicas the pipeline
// scenario runs (one partition each), as issue 15 asks.
const pipelineReplicas = 2

// pipelineLoads are the fractions of the measured client ingest capacity
// the pipeline scenario ingests at.
var pipelineLoads = []float64{0.5, 0.8}

func runPipeline(ctx context.Context, e *env) error {
	r := &e.res.Pipeline
	capacity, err := pipelineCapacity(ctx, e)
	if err != nil {
		return err
	}
	r.CapacityEventsPerS = f64(round1(capacity))
	r.TriggerReplicas = pipelineReplicas
	for i, load := range pipelineLoads {
		if i > 0 {
			if err := e.reset(ctx); err != nil {
				return err
			}
		}
		step, err := pipelineStep(ctx, e, load, capacity*load)
		if err != nil {
			return fmt.Errorf("at %.0f%% of capacity: %w", 100*load, err)
		}
		r.Steps = append(r.Steps, step)
		switch load {
		case 0.5:
			r.RateEventsPerS, r.Requests = f64(step.RateEventsPerS), step.Requests
			r.TriggerLagP50MS, r.TriggerLagP99MS = f64(step.TriggerLagP50MS), f64(step.TriggerLagP99MS)
		case 0.8:
			r.TriggerLag80P50MS, r.TriggerLag80P99MS = f64(step.TriggerLagP50MS), f64(step.TriggerLagP99MS)
		}
	}
	return nil
}

// pipelineCapacity is the client ingest rate measured by the ingest
// scenario of this run, or a short burst of its own when that did not run.
func pipelineCapacity(ctx context.Context, e *env) (float64, error) {
	if c := e.res.Ingest.NATSEventsPerS; c != nil {
		return *c, nil
	}
	c, err := e.ingestCorpus(min(e.sizes.ingestEvents, 20000), e.sizes.ingestSessions)
	if err != nil {
		return 0, err
	}
	d, err := clientPublish(ctx, e, c.events)
	if err != nil {
		return 0, err
	}
	capacity := rate(len(c.events), d)
	e.progress("   ingest capacity (pkg/client): %.0f events/s", capacity)
	return capacity, e.reset(ctx)
}

// pipelineStep ingests steadily at target events/s for the scenario's
// duration while pipelineReplicas trigger replicas share the sessions, waits
// until they took every record, and measures each extraction request's lag
// behind the record it covers.
func pipelineStep(ctx context.Context, e *env, load, target float64) (PipelineStep, error) {
	step := PipelineStep{Load: load, RateEventsPerS: round1(target)}
	if _, err := tenantcfg.Put(ctx, e.js, benchTenant, benchThresholds); err != nil {
		return step, fmt.Errorf("setting the tenant thresholds: %w", err)
	}
	n := int(target * e.sizes.pipelineDuration.Seconds())
	evs := benchgen.New(5).Interleaved(benchgen.SessionIDs("p", e.sizes.pipelineSessions), n)
	cl, err := client.New(e.js, benchTenant)
	if err != nil {
		return step, err
	}
	cfg := triggersvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig()}
	svcs, err := startTriggers(ctx, e, cfg, pipelineReplicas, fmt.Sprintf("pipeline-%.0f", 100*load))
	if err != nil {
		return step, err
	}
	defer func() {
		for _, s := range svcs {
			_ = s.stop()
		}
	}()

	e.progress("   steady ingest of %d events at %.0f events/s (%.0f%% of capacity) for %s, %d trigger replicas", n, target, 100*load, e.sizes.pipelineDuration, pipelineReplicas)
	sent, achieved, err := paceIngest(ctx, cl, evs, target)
	if err != nil {
		return step, err
	}
	step.AchievedEventsPerS = round1(achieved)
	if achieved < 0.9*target {
		e.progress("   steady ingest fell behind: %.0f of %.0f events/s", achieved, target)
	}
	tstream, err := e.js.Stream(ctx, events.StreamTranscript)
	if err != nil {
		return step, err
	}
	last := tstream.CachedInfo().State.LastSeq
	for p := range pipelineReplicas {
		if _, _, err := waitConsumed(ctx, e.js, events.StreamTranscript, events.TriggerDurable(p, pipelineReplicas), last, svcs[0]); err != nil {
			return step, err
		}
	}
	lags, err := triggerLags(ctx, e.js, tstream)
	if err != nil {
		return step, err
	}
	step.Requests = len(lags)
	if len(lags) == 0 {
		return step, fmt.Errorf("the trigger published no extraction request for %d events", sent)
	}
	step.TriggerLagP50MS = round3(lags.percentile(50) / 1000)
	step.TriggerLagP99MS = round3(lags.percentile(99) / 1000)
	e.progress("   trigger lag: p50 %.1f ms, p99 %.1f ms over %d requests", step.TriggerLagP50MS, step.TriggerLagP99MS, len(lags))
	return step, nil
}

// startTriggers starts replicas trigger services with cfg, partitioned one
// partition each, and returns once every partition's consumer is pulling
// (or already delivered records): a replica waits a moment after joining
// before it takes partitions, and the records stored meanwhile would count
// that wait as lag.
func startTriggers(ctx context.Context, e *env, cfg triggersvc.Config, replicas int, name string) ([]*service, error) {
	cfg.TriggerPartitions = replicas
	var svcs []*service
	for i := range replicas {
		rc := cfg
		rc.MemberID = fmt.Sprintf("%s-%d", name, i)
		svc, err := startService(ctx, "trigger", func(ctx context.Context) error {
			return triggersvc.Run(ctx, rc, e.log.With("service", "trigger", "replica", i))
		}, nil)
		if err != nil {
			for _, s := range svcs {
				_ = s.stop()
			}
			return nil, err
		}
		svcs = append(svcs, svc)
	}
	for p := range replicas {
		ready := func(ctx context.Context) error {
			c, err := e.js.Consumer(ctx, events.StreamTranscript, events.TriggerDurable(p, replicas))
			if err != nil {
				return err
			}
			if info := c.CachedInfo(); info.NumWaiting == 0 && info.Delivered.Stream == 0 {
				return errors.New("not pulling yet")
			}
			return nil
		}
		deadline := time.Now().Add(30 * time.Second)
		for ready(ctx) != nil {
			if time.Now().After(deadline) || ctx.Err() != nil {
				for _, s := range svcs {
					_ = s.stop()
				}
				return nil, fmt.Errorf("trigger partition %d of %d is not consumed after 30s", p, replicas)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return svcs, nil
}

// paceIngest publishes evs with cl at target events/s, a batch every
// pipelineTick, and returns how many it sent and the rate it achieved.
func paceIngest(ctx context.Context, cl *client.Client, evs []event.Event, target float64) (int, float64, error) {
	start := time.Now()
	tick := time.NewTicker(pipelineTick)
	defer tick.Stop()
	sent := 0
	for sent < len(evs) {
		select {
		case <-ctx.Done():
			return sent, 0, ctx.Err()
		case <-tick.C:
		}
		due := min(len(evs), int(time.Since(start).Seconds()*target))
		if due <= sent {
			continue
		}
		if _, err := cl.PublishBatch(ctx, evs[sent:due]); err != nil {
			return sent, 0, fmt.Errorf("steady ingest: %w", err)
		}
		sent = due
	}
	return sent, rate(sent, time.Since(start)), nil
}

// triggerLags reads every extraction request on RECALL_EXTRACT and returns,
// for each, the time from the transcript record it covers up to being
// stored to the request being stored (both stream timestamps).
func triggerLags(ctx context.Context, js jetstream.JetStream, transcript jetstream.Stream) (latencies, error) {
	xs, err := js.Stream(ctx, events.StreamExtract)
	if err != nil {
		return nil, err
	}
	st := xs.CachedInfo().State
	if st.Msgs == 0 {
		return nil, nil
	}
	// A work-queue stream allows no second consumer: read it by sequence.
	lags := make(latencies, 0, st.Msgs)
	for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
		m, err := xs.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", events.StreamExtract, err)
		}
		var req events.ExtractionRequested
		if err := json.Unmarshal(m.Data, &req); err != nil {
			return nil, fmt.Errorf("decoding an extraction request: %w", err)
		}
		rec, err := transcript.GetMsg(ctx, req.UpToSeq)
		if err != nil {
			return nil, fmt.Errorf("reading transcript record %d: %w", req.UpToSeq, err)
		}
		lags = append(lags, m.Time.Sub(rec.Time))
	}
	return lags, nil
}
