package indexersvc

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/recallhq/recall/pkg/events"
)

var (
	tracer = otel.Tracer("recall/indexer")
	meter  = otel.Meter("recall/indexer")
)

// metrics are the indexer's instruments.
type metrics struct {
	indexings metric.Int64Counter
	duration  metric.Float64Histogram
	tokens    metric.Int64Counter
	costUSD   metric.Float64Counter
	queries   metric.Int64Counter
	overhead  metric.Float64Histogram
}

func newMetrics() *metrics {
	m := &metrics{}
	m.indexings, _ = meter.Int64Counter("recall_index_total",
		metric.WithDescription("session indexings, by outcome (success, failure) and reason (turn_end, session_ended, forced)"))
	m.duration, _ = meter.Float64Histogram("recall_index_duration_seconds",
		metric.WithDescription("time of one indexing, transcript read and model calls included"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
	m.tokens, _ = meter.Int64Counter("recall_index_tokens_total",
		metric.WithDescription("LLM tokens spent on indexing and questions, by kind (input, output)"))
	m.costUSD, _ = meter.Float64Counter("recall_index_cost_usd_total",
		metric.WithDescription("USD spent on indexing and questions, by the configured price table"))
	m.queries, _ = meter.Int64Counter("recall_query_total",
		metric.WithDescription("questions to past sessions, by outcome (answered, error)"))
	m.overhead, _ = meter.Float64Histogram("recall_query_overhead_seconds",
		metric.WithDescription("time of a question outside the model call (resolution, transcript read, serialization)"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
	return m
}

func (m *metrics) indexed(ctx context.Context, out *events.SessionIndexed) {
	outcome := "success"
	if !out.Success {
		outcome = "failure"
	}
	m.indexings.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome), attribute.String("reason", out.Reason)))
	m.duration.Record(ctx, float64(out.DurationMS)/1000)
	m.spent(ctx, out.Usage, out.CostUSD)
}

func (m *metrics) spent(ctx context.Context, u events.TokenUsage, usd float64) {
	m.tokens.Add(ctx, u.InputTokens+u.CacheReadTokens+u.CacheCreationTokens, metric.WithAttributes(attribute.String("kind", "input")))
	m.tokens.Add(ctx, u.OutputTokens, metric.WithAttributes(attribute.String("kind", "output")))
	m.costUSD.Add(ctx, usd)
}

func (m *metrics) queried(ctx context.Context, outcome string, overhead time.Duration) {
	m.queries.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	if overhead > 0 {
		m.overhead.Record(ctx, overhead.Seconds())
	}
}
