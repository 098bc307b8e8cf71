package telemetrytest_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/telemetry/telemetrytest"
)

// Obtained at package init, before any provider is installed, like the
// tracers and meters services keep in package variables.
var (
	tracer     = otel.Tracer("recall/telemetrytest")
	counter, _ = otel.Meter("recall/telemetrytest").Int64Counter("recall_test_events")
)

func TestRecorderFollowsPropagatedTrace(t *testing.T) {
	for _, round := range []string{"first", "second"} {
		t.Run(round, func(t *testing.T) {
			rec := telemetrytest.NewRecorder(t)
			ctx, parent := tracer.Start(context.Background(), "publish")
			headers := propagation.MapCarrier{}
			otel.GetTextMapPropagator().Inject(ctx, headers)
			parent.End()
			if headers["traceparent"] == "" {
				t.Fatalf("propagator injected no traceparent: %v", headers)
			}

			// The receiving side, as another service would do it.
			rctx := otel.GetTextMapPropagator().Extract(context.Background(), headers)
			_, child := tracer.Start(rctx, "consume", trace.WithAttributes(attribute.String("recall.tenant", "t1")))
			child.End()

			spans := rec.WaitFor(t, "consume", 1, time.Second)
			id := parent.SpanContext().TraceID()
			if got := len(rec.Trace(id)); got != 2 {
				t.Fatalf("trace has %d spans (%v), want 2", got, telemetrytest.Names(rec.Ended()))
			}
			p, ok := telemetrytest.ParentOf(spans[0], rec.Ended())
			if !ok || p.Name() != "publish" {
				t.Errorf("parent of consume = %v, %v", p, ok)
			}
			if v, ok := telemetrytest.Attr(spans[0], "recall.tenant"); !ok || v.AsString() != "t1" {
				t.Errorf("recall.tenant = %v, %v", v, ok)
			}
		})
	}
}

func TestRecorderSeesOnlyLaterSpans(t *testing.T) {
	_, s := tracer.Start(context.Background(), "before")
	s.End()
	rec := telemetrytest.NewRecorder(t)
	if got := rec.Named("before"); len(got) != 0 {
		t.Errorf("recorder saw %d spans ended before it existed", len(got))
	}
}

func TestMetricsValueIsChangeSinceNewMetrics(t *testing.T) {
	ctx := context.Background()
	counter.Add(ctx, 5, metricAttrs("accepted"))
	m := telemetrytest.NewMetrics(t)
	counter.Add(ctx, 2, metricAttrs("accepted"))
	counter.Add(ctx, 1, metricAttrs("rejected"))

	if v, ok := m.Value(t, "recall_test_events", attribute.String("outcome", "accepted")); !ok || v != 2 {
		t.Errorf("accepted = %v, %v; want 2", v, ok)
	}
	if v, ok := m.Value(t, "recall_test_events"); !ok || v != 3 {
		t.Errorf("all = %v, %v; want 3", v, ok)
	}
	if _, ok := m.Value(t, "recall_test_events", attribute.String("outcome", "other")); ok {
		t.Error("found data points for an attribute value never recorded")
	}
	m.WaitForValue(t, "recall_test_events", 3, time.Second)
}

func metricAttrs(outcome string) metric.AddOption {
	return metric.WithAttributes(attribute.String("outcome", outcome))
}
