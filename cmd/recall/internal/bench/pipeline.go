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

// pipelineReplicas is how many trigger replicas the pipeline scenario runs
// (sharing the transcript's shards, so each reads half of the records), as
// issues 15 and 32 ask.
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
	if err := e.reset(ctx); err != nil {
		return err
	}
	return rawPipeline(ctx, e)
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
// duration while pipelineReplicas trigger replicas share the shards, waits
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
	rs, err := startTriggerReplicas(ctx, e, cfg, pipelineReplicas, fmt.Sprintf("pipeline-%.0f", 100*load))
	if err != nil {
		return step, err
	}
	defer stopReplicas(rs)

	e.progress("   steady ingest of %d events at %.0f events/s (%.0f%% of capacity) for %s, %d trigger replicas", n, target, 100*load, e.sizes.pipelineDuration, pipelineReplicas)
	p := startPhase()
	sent, achieved, err := paceIngest(ctx, cl, evs, target)
	if err != nil {
		return step, err
	}
	step.AchievedEventsPerS = round1(achieved)
	if achieved < 0.9*target {
		e.progress("   steady ingest fell behind: %.0f of %.0f events/s", achieved, target)
	}
	last, err := e.lastSeqs(ctx)
	if err != nil {
		return step, err
	}
	if _, _, err := e.waitAcked(ctx, events.DurableTrigger, last, services(rs)...); err != nil {
		return step, err
	}
	if wall, cpu, ok := p.end(); ok {
		step.CPUCores = f64(round3(cpu.Seconds() / wall.Seconds()))
		step.CPUUSPerEvent = cpuPerEvent(cpu, ok, sent)
	}
	_, most := delivered(rs)
	step.DeliveredFraction = round3(float64(most) / float64(max(last.total(), 1)))
	lags, err := triggerLags(ctx, e)
	if err != nil {
		return step, err
	}
	step.Requests = len(lags)
	if len(lags) == 0 {
		return step, fmt.Errorf("the trigger published no extraction request for %d events", sent)
	}
	step.TriggerLagP50MS = round3(lags.percentile(50) / 1000)
	step.TriggerLagP99MS = round3(lags.percentile(99) / 1000)
	e.progress("   trigger lag: p50 %.1f ms, p99 %.1f ms over %d requests; the busiest replica received %.3f of the records; %.2f cores busy, %.1f µs CPU per event",
		step.TriggerLagP50MS, step.TriggerLagP99MS, len(lags), step.DeliveredFraction, deref(step.CPUCores), deref(step.CPUUSPerEvent))
	return step, nil
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
// stored (in its session's shard) to the request being stored (both stream
// timestamps).
func triggerLags(ctx context.Context, e *env) (latencies, error) {
	xs, err := e.js.Stream(ctx, events.StreamExtract)
	if err != nil {
		return nil, err
	}
	st := xs.CachedInfo().State
	if st.Msgs == 0 {
		return nil, nil
	}
	shards := make([]jetstream.Stream, e.layout().Shards())
	for k, name := range e.layout().Streams() {
		if shards[k], err = e.js.Stream(ctx, name); err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
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
		rec, err := shards[e.layout().Shard(req.Tenant, req.Session)].GetMsg(ctx, req.UpToSeq)
		if err != nil {
			return nil, fmt.Errorf("reading transcript record %d of %s/%s: %w", req.UpToSeq, req.Tenant, req.Session, err)
		}
		lags = append(lags, m.Time.Sub(rec.Time))
	}
	return lags, nil
}
