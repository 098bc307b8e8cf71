package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/retry"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// The raw pipeline is the floor of the pipeline scenario: what JetStream
// itself allows on this machine at the same fractions of its own capacity.
// A raw async publisher sends the very messages pkg/client builds into the
// shard streams at load × the raw publish capacity measured in this run,
// while pipelineReplicas raw consumers, each on its own connection and its
// half of the shards, read them configured like the trigger (AckAll, the
// pinned priority group, the same pull batch, an ack every AckEvery) and
// decide nothing. Its lag is from when a record was due to be published to
// a consumer receiving it: a publisher that cannot keep up shows as lag too
// (the backlog is then the publisher's). When this floor misses a lag
// target, no trigger can meet it on this machine: the trigger does this
// work and more. One more step runs the floor at the rate of the pipeline's
// 80 % step, to compare the two at the same offered load.

// rawPipelineDurable is the raw consumers' durable on every shard stream.
const rawPipelineDurable = "bench-raw-pipeline"

// rawPipelineLagEvery samples the lag of one record in this many.
const rawPipelineLagEvery = 4

// headerDue carries when a raw pipeline record was due to be published
// (Unix nanoseconds).
const headerDue = "Recall-Bench-Due"

// rawPipeline runs the raw floor at every pipeline load and records it in
// e.res.Pipeline.
func rawPipeline(ctx context.Context, e *env) error {
	r := &e.res.Pipeline
	c, err := e.ingestCorpus(e.sizes.ingestEvents, e.sizes.ingestSessions)
	if err != nil {
		return err
	}
	capacity := e.res.Ingest.RawEventsPerS
	if capacity == nil {
		if err := rawShardPublish(ctx, e, c); err != nil {
			return err
		}
		capacity = e.res.Ingest.RawEventsPerS
	}
	r.RawCapacityEventsPerS = capacity
	loads := slices.Clone(pipelineLoads)
	var recall80 float64
	if n := len(r.Steps); n > 0 && r.Steps[n-1].Load == 0.8 {
		recall80 = r.Steps[n-1].RateEventsPerS / *capacity
		loads = append(loads, recall80)
	}
	for _, load := range loads {
		step, err := rawPipelineStep(ctx, e, c, load, *capacity*load)
		if rerr := e.reset(ctx); err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("raw floor at %.0f%% of capacity: %w", 100*load, err)
		}
		r.RawSteps = append(r.RawSteps, step)
		switch load {
		case 0.8:
			r.RawLag80P99MS = f64(step.LagP99MS)
		case recall80:
			r.RawLagAtRecall80P99MS = f64(step.LagP99MS)
			compareAtRecall80(r, r.Steps[len(r.Steps)-1], step)
		}
	}
	return nil
}

// compareAtRecall80 records the pipeline's 80 % step against the raw floor
// at the same offered rate: lag p99 and CPU per event, each a ratio.
func compareAtRecall80(r *PipelineResult, rec PipelineStep, raw RawPipelineStep) {
	if raw.LagP99MS > 0 {
		r.TriggerLag80P99VsRaw = f64(round3(rec.TriggerLagP99MS / raw.LagP99MS))
	}
	r.CPUUSPerEvent, r.RawCPUUSPerEvent = rec.CPUUSPerEvent, raw.CPUUSPerEvent
	if rec.CPUUSPerEvent != nil && raw.CPUUSPerEvent != nil && *raw.CPUUSPerEvent > 0 {
		r.CPURatioVsRaw = f64(round3(*rec.CPUUSPerEvent / *raw.CPUUSPerEvent))
	}
}

// rawPipelineStep publishes c's messages (again and again, each round with
// fresh message ids) at target events/s for the scenario's duration while
// the raw consumers read them, and measures the lag.
func rawPipelineStep(ctx context.Context, e *env, c *corpus, load, target float64) (RawPipelineStep, error) {
	step := RawPipelineStep{Load: load, RateEventsPerS: round1(target)}
	n := int(target * e.sizes.pipelineDuration.Seconds())
	cfg := triggersvc.Config{}.WithDefaults()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := startRawConsumers(cctx, e, cfg)
	defer e.deleteDurable(context.WithoutCancel(ctx), rawPipelineDurable)
	if err != nil {
		return step, err
	}
	e.progress("   raw floor: %d messages at %.0f/s (%.0f%% of raw publish capacity) for %s, %d raw consumers", n, target, 100*load, e.sizes.pipelineDuration, pipelineReplicas)
	p := startPhase()
	achieved, err := paceRawPublish(ctx, e.js, c.msgs, n, target)
	if err != nil {
		return step, err
	}
	step.AchievedEventsPerS = round1(achieved)
	last, err := e.lastSeqs(ctx)
	if err != nil {
		return step, err
	}
	if err := cons.caughtUp(ctx, last); err != nil {
		return step, err
	}
	if wall, cpu, ok := p.end(); ok {
		step.CPUCores = f64(round3(cpu.Seconds() / wall.Seconds()))
		step.CPUUSPerEvent = cpuPerEvent(cpu, ok, n)
	}
	cancel()
	lags, err := cons.wait()
	if err != nil {
		return step, err
	}
	if len(lags) == 0 {
		return step, errors.New("the raw consumers received nothing")
	}
	step.LagP50MS = round3(lags.percentile(50) / 1000)
	step.LagP99MS = round3(lags.percentile(99) / 1000)
	e.progress("   raw floor lag: p50 %.1f ms, p99 %.1f ms; published %.0f of %.0f/s; %.2f cores busy, %.1f µs CPU per event",
		step.LagP50MS, step.LagP99MS, achieved, target, deref(step.CPUCores), deref(step.CPUUSPerEvent))
	return step, nil
}

// paceRawPublish publishes n messages cycling through msgs at target/s, a
// batch every pipelineTick, and returns the rate achieved (acks awaited).
// A message of a later round carries its round in its id, so dedup keeps it.
func paceRawPublish(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg, n int, target float64) (float64, error) {
	start := time.Now()
	tick := time.NewTicker(pipelineTick)
	defer tick.Stop()
	for sent := 0; sent < n; {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
		for due := min(n, int(time.Since(start).Seconds()*target)); sent < due; sent++ {
			at := start.Add(time.Duration(float64(sent) / target * float64(time.Second)))
			if _, err := js.PublishMsgAsync(roundMsg(msgs, sent, at), jetstream.WithStallWait(time.Minute)); err != nil {
				return 0, fmt.Errorf("raw publish: %w", err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return rate(n, time.Since(start)), nil
}

// roundMsg is the i-th message of the cycle through msgs, due at due.
func roundMsg(msgs []*nats.Msg, i int, due time.Time) *nats.Msg {
	m, round := msgs[i%len(msgs)], i/len(msgs)
	h := maps.Clone(m.Header)
	if round > 0 {
		h.Set(jetstream.MsgIDHeader, m.Header.Get(jetstream.MsgIDHeader)+"-r"+strconv.Itoa(round))
	}
	h[headerDue] = []string{strconv.FormatInt(due.UnixNano(), 10)}
	return &nats.Msg{Subject: m.Subject, Header: h, Data: m.Data}
}

// rawConsumers are the raw pipeline's consumers: one goroutine per shard,
// the shards split between pipelineReplicas connections.
type rawConsumers struct {
	wg    sync.WaitGroup
	seen  []atomic.Uint64 // the highest stream sequence received, per shard
	mu    sync.Mutex
	lags  latencies
	errs  []error
	conns []*nats.Conn
}

func startRawConsumers(ctx context.Context, e *env, cfg triggersvc.Config) (*rawConsumers, error) {
	streams := e.layout().Streams()
	rc := &rawConsumers{seen: make([]atomic.Uint64, len(streams)), errs: make([]error, len(streams))}
	jss := make([]jetstream.JetStream, pipelineReplicas)
	for i := range jss {
		nc, err := nats.Connect(e.url, nats.Name(fmt.Sprintf("recall-bench-raw-%d", i)))
		if err != nil {
			rc.close()
			return nil, err
		}
		rc.conns = append(rc.conns, nc)
		if jss[i], err = jetstream.New(nc); err != nil {
			rc.close()
			return nil, err
		}
	}
	cc := cfg.ConsumerConfig()
	cc.Durable, cc.Description = rawPipelineDurable, "recall bench: the raw pipeline floor"
	for k, stream := range streams {
		js := jss[k%len(jss)]
		cons, err := js.CreateOrUpdateConsumer(ctx, stream, cc)
		if err != nil {
			rc.close()
			return nil, fmt.Errorf("creating a consumer on %s: %w", stream, err)
		}
		rc.wg.Add(1)
		go func() {
			defer rc.wg.Done()
			rc.errs[k] = rc.consume(ctx, cons, cfg, k)
		}()
	}
	return rc, nil
}

// consume reads shard k until ctx ends, sampling the lag of every
// rawPipelineLagEvery-th record and acknowledging every AckEvery-th.
func (rc *rawConsumers) consume(ctx context.Context, cons jetstream.Consumer, cfg triggersvc.Config, k int) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(cfg.PullBatch), jetstream.PullPriorityGroup(triggersvc.PriorityGroup))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	var lags latencies
	defer func() { rc.mu.Lock(); rc.lags = append(rc.lags, lags...); rc.mu.Unlock() }()
	for n := 1; ; n++ {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if n%rawPipelineLagEvery == 0 {
			due, err := strconv.ParseInt(m.Headers().Get(headerDue), 10, 64)
			if err != nil {
				return fmt.Errorf("record %d of %s carries no due time", md.Sequence.Stream, md.Stream)
			}
			lags = append(lags, time.Since(time.Unix(0, due)))
		}
		if n%cfg.AckEvery == 0 {
			_ = m.Ack()
		}
		rc.seen[k].Store(md.Sequence.Stream)
	}
}

// caughtUp waits until every shard's consumer received up to last.
func (rc *rawConsumers) caughtUp(ctx context.Context, last shardSeqs) error {
	deadline := time.Now().Add(2 * time.Minute)
	for k := 0; k < len(last); {
		if rc.seen[k].Load() >= last[k] {
			k++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the raw consumer of shard %d received %d of %d records in 2m", k, rc.seen[k].Load(), last[k])
		}
		if !retry.Pause(ctx.Done(), 5*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// wait returns the lags once every consumer stopped (ctx ended), or what
// stopped a consumer before.
func (rc *rawConsumers) wait() (latencies, error) {
	rc.wg.Wait()
	rc.close()
	return rc.lags, errors.Join(rc.errs...)
}

func (rc *rawConsumers) close() {
	for _, nc := range rc.conns {
		nc.Close()
	}
	rc.conns = nil
}
