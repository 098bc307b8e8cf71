package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

func runPipeline(ctx context.Context, e *env) error {
	r := &e.res.Pipeline
	capacity := e.res.Ingest.NATSEventsPerS
	if capacity == nil {
		c, err := e.ingestCorpus(min(e.sizes.ingestEvents, 20000), e.sizes.ingestSessions)
		if err != nil {
			return err
		}
		d, err := clientPublish(ctx, e, c.events)
		if err != nil {
			return err
		}
		capacity = f64(rate(len(c.events), d))
		e.progress("   ingest capacity (pkg/client): %.0f events/s", *capacity)
		if err := e.reset(ctx); err != nil {
			return err
		}
	}
	target := *capacity / 2
	r.RateEventsPerS = f64(round1(target))
	if _, err := tenantcfg.Put(ctx, e.js, benchTenant, benchThresholds); err != nil {
		return fmt.Errorf("setting the tenant thresholds: %w", err)
	}

	n := int(target * e.sizes.pipelineDuration.Seconds())
	evs := benchgen.New(5).Interleaved(benchgen.SessionIDs("p", e.sizes.pipelineSessions), n)
	cl, err := client.New(e.js, benchTenant)
	if err != nil {
		return err
	}

	cfg := triggersvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig()}
	svc, err := startService(ctx, "trigger", func(ctx context.Context) error {
		return triggersvc.Run(ctx, cfg, e.log.With("service", "trigger"))
	}, consumerReady(e.js, events.StreamTranscript, events.DurableTrigger))
	if err != nil {
		return err
	}
	defer svc.stop()

	e.progress("   steady ingest of %d events at %.0f events/s (50%% of capacity) for %s", n, target, e.sizes.pipelineDuration)
	start := time.Now()
	tick := time.NewTicker(pipelineTick)
	defer tick.Stop()
	sent := 0
	for sent < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		due := min(n, int(time.Since(start).Seconds()*target))
		if due <= sent {
			continue
		}
		if _, err := cl.PublishBatch(ctx, evs[sent:due]); err != nil {
			return fmt.Errorf("steady ingest: %w", err)
		}
		sent = due
	}
	achieved := rate(sent, time.Since(start))
	if achieved < 0.9*target {
		e.progress("   steady ingest fell behind: %.0f of %.0f events/s", achieved, target)
	}
	tstream, err := e.js.Stream(ctx, events.StreamTranscript)
	if err != nil {
		return err
	}
	last := tstream.CachedInfo().State.LastSeq
	if _, _, err := waitConsumed(ctx, e.js, events.StreamTranscript, events.DurableTrigger, last, svc); err != nil {
		return err
	}
	lags, err := triggerLags(ctx, e.js, tstream)
	if err != nil {
		return err
	}
	r.Requests = len(lags)
	if len(lags) == 0 {
		return fmt.Errorf("the trigger published no extraction request for %d events", sent)
	}
	r.TriggerLagP50MS = f64(round3(lags.percentile(50) / 1000))
	r.TriggerLagP99MS = f64(round3(lags.percentile(99) / 1000))
	e.progress("   trigger lag: p50 %.1f ms, p99 %.1f ms over %d requests", *r.TriggerLagP50MS, *r.TriggerLagP99MS, len(lags))
	return nil
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
