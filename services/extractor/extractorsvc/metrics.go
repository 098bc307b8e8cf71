package extractorsvc

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/recallhq/recall/pkg/events"
)

var (
	tracer = otel.Tracer("recall/extractor")
	meter  = otel.Meter("recall/extractor")

	durationHist, _ = meter.Float64Histogram("recall_extraction_duration_seconds",
		metric.WithDescription("time from taking an extraction request to its outcome"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300))
	tokensCounter, _ = meter.Int64Counter("recall_extraction_tokens_total",
		metric.WithDescription("LLM tokens spent on extractions, by kind (input, output, cache_read, cache_creation)"))
	extractionsCounter, _ = meter.Int64Counter("recall_extractions_total",
		metric.WithDescription("extraction requests handled, by outcome (completed, skipped, conflict, failed, retry)"))
)

// workers is every running Worker of the process, for the partitions gauge.
var workers = struct {
	sync.Mutex
	m map[*Worker]bool
}{m: map[*Worker]bool{}}

var registerGauge sync.Once

// eachWorker calls f for every running Worker (under the registry's lock).
func eachWorker(f func(*Worker)) {
	workers.Lock()
	defer workers.Unlock()
	for w := range workers.m {
		f(w)
	}
}

func registerWorker(w *Worker) (unregister func()) {
	registerGauge.Do(func() {
		_, _ = meter.Int64ObservableGauge("recall_extractor_partitions_owned",
			metric.WithDescription("extraction partitions a worker currently consumes"),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				eachWorker(func(w *Worker) {
					o.Observe(int64(len(w.group.Owned())), metric.WithAttributes(attribute.String("worker", w.cfg.WorkerID)))
				})
				return nil
			}))
		_, _ = meter.Int64ObservableCounter("recall_extractor_shared_total",
			metric.WithDescription("requests run by another worker than their partition's owner, by direction (out: this worker's run elsewhere, in: others' run here)"),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				eachWorker(func(w *Worker) {
					out, in := w.group.Shared()
					id := attribute.String("worker", w.cfg.WorkerID)
					o.Observe(int64(out), metric.WithAttributes(id, attribute.String("direction", "out")))
					o.Observe(int64(in), metric.WithAttributes(id, attribute.String("direction", "in")))
				})
				return nil
			}))
	})
	workers.Lock()
	workers.m[w] = true
	workers.Unlock()
	return func() {
		workers.Lock()
		delete(workers.m, w)
		workers.Unlock()
	}
}

func (w *Worker) observe(ctx context.Context, start time.Time, outcome string, u events.TokenUsage) {
	attrs := metric.WithAttributes(attribute.String("outcome", outcome))
	durationHist.Record(ctx, time.Since(start).Seconds(), attrs)
	extractionsCounter.Add(ctx, 1, attrs)
	for kind, n := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens,
		"cache_read": u.CacheReadTokens, "cache_creation": u.CacheCreationTokens} {
		if n > 0 {
			tokensCounter.Add(ctx, n, metric.WithAttributes(attribute.String("kind", kind)))
		}
	}
}
