package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/pkg/client"
)

// ingestPublishers is how many goroutines publish through pkg/client at once
// (each PublishBatch waits for its acks, so two keep the pipe full).
const ingestPublishers = 2

// clientBatch is the number of events per pkg/client PublishBatch call.
const clientBatch = 500

func runIngest(ctx context.Context, e *env) error {
	r := &e.res.Ingest
	c, err := e.ingestCorpus(e.sizes.ingestEvents, e.sizes.ingestSessions)
	if err != nil {
		return err
	}
	r.Events = len(c.events)
	if e.res.Raw.JSPublishMsgsPerS == nil {
		// --only ingest: measure the ceiling it is compared with.
		if err := runRawPublishOnly(ctx, e, c); err != nil {
			return err
		}
	}

	if err := rawShardPublish(ctx, e, c); err != nil {
		return err
	}
	p := startPhase()
	d, err := clientPublish(ctx, e, c.events)
	if err != nil {
		return err
	}
	_, cpu, cpuOK := p.end()
	r.NATSEventsPerS = f64(round1(rate(len(c.events), d)))
	r.RatioNATSVsRaw = ratio(r.NATSEventsPerS, e.res.Raw.JSPublishMsgsPerS)
	r.CPUUSPerEvent = cpuPerEvent(cpu, cpuOK, len(c.events))
	r.CPURatioVsRaw = ratio(r.CPUUSPerEvent, r.RawCPUUSPerEvent)
	e.progress("   ingest pkg/client: %.0f events/s (%.2f x raw publish), %.2f µs CPU per event (%.2f x raw)",
		*r.NATSEventsPerS, deref(r.RatioNATSVsRaw), deref(r.CPUUSPerEvent), deref(r.CPURatioVsRaw))

	if err := e.reset(ctx); err != nil {
		return err
	}
	if d, err = clientPublish(ctx, e, c.events, client.Ordered()); err != nil {
		return err
	}
	r.NATSOrderedEventsPerS = f64(round1(rate(len(c.events), d)))
	r.RatioNATSOrderedVsRaw = ratio(r.NATSOrderedEventsPerS, e.res.Raw.JSPublishMsgsPerS)
	e.progress("   ingest pkg/client, ordered: %.0f events/s (%.2f x raw publish)", *r.NATSOrderedEventsPerS, deref(r.RatioNATSOrderedVsRaw))
	if err := e.reset(ctx); err != nil {
		return err
	}
	if err := ingestService(ctx, e, c); err != nil {
		return err
	}
	return nil
}

// rawShardPublish is the floor of ingest.cpu_ratio_vs_raw: raw JetStream
// async publish (asyncWindow in flight, acks awaited) of the very messages
// pkg/client builds for the corpus, into the same shard streams, so that
// the server does the same work as for pkg/client and only the client
// side differs. It measures its rate and CPU per event, then resets the
// streams.
func rawShardPublish(ctx context.Context, e *env, c *corpus) error {
	r := &e.res.Ingest
	p := startPhase()
	d, err := asyncPublish(ctx, e.js, c.msgs)
	if err != nil {
		return err
	}
	_, cpu, cpuOK := p.end()
	r.RawEventsPerS = f64(round1(rate(len(c.msgs), d)))
	r.RawCPUUSPerEvent = cpuPerEvent(cpu, cpuOK, len(c.msgs))
	e.progress("   raw async publish into the shards: %.0f events/s, %.2f µs CPU per event", *r.RawEventsPerS, deref(r.RawCPUUSPerEvent))
	return e.reset(ctx)
}

// runRawPublishOnly measures raw publish alone, for runs without the raw
// scenario.
func runRawPublishOnly(ctx context.Context, e *env, c *corpus) error {
	only := *e
	only.sizes.latencySamples = 200
	if err := runRaw(ctx, &only); err != nil {
		return fmt.Errorf("measuring the raw baselines: %w", err)
	}
	return e.reset(ctx)
}

// clientPublish publishes evs through pkg/client (validation, encoding,
// async publish, acks awaited) from ingestPublishers goroutines and returns
// the elapsed time.
func clientPublish(ctx context.Context, e *env, evs []event.Event, opts ...client.Option) (time.Duration, error) {
	cl, err := client.New(e.js, benchTenant, opts...)
	if err != nil {
		return 0, err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan []event.Event)
	start := time.Now()
	for w := 0; w < ingestPublishers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				if _, err := cl.PublishBatch(ctx, b); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < len(evs); i += clientBatch {
		next <- evs[i:min(i+clientBatch, len(evs))]
	}
	close(next)
	wg.Wait()
	d := time.Since(start)
	if first != nil {
		return 0, fmt.Errorf("publishing through pkg/client: %w", first)
	}
	return d, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
