package extractorsvc

import (
	"context"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/telemetry/telemetrytest"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/services/extractor/extractorsvc/extractortest"
)

func TestSpanLinkedToRequestTraceAndMetrics(t *testing.T) {
	rec := telemetrytest.NewRecorder(t)
	met := telemetrytest.NewMetrics(t)
	e := newEnv(t)
	w := e.startWorker(t, testConfig("w1"), &extractortest.EditProvider{})
	seqs := e.appendMessages(t, "acme", "s1", 2)

	// The request carries the trace of the transcript record behind it.
	ctx, parent := otel.Tracer("test").Start(context.Background(), "trigger decision")
	r := events.ExtractionRequested{Tenant: "acme", Session: "s1", UpToSeq: seqs[1], Reason: "test"}
	ev := event.New()
	ev.SetID(r.RequestDedupID())
	ev.SetSource("/test")
	ev.SetType(events.TypeExtractionRequested)
	ev.SetSubject("s1")
	ev.SetExtension(events.ExtTenant, "acme")
	_ = ev.SetData(event.ApplicationJSON, r)
	msg := natsce.NewMsg(events.ExtractSubject("acme", "s1"), &ev)
	natsce.Inject(ctx, msg.Header)
	parent.End()
	if _, err := e.js.PublishMsg(ctx, msg, jetstream.WithMsgID(r.RequestDedupID())); err != nil {
		t.Fatal(err)
	}
	spans := rec.WaitFor(t, "extraction", 1, 10*time.Second)
	if !telemetrytest.LinkedTo(spans[0], parent.SpanContext().TraceID()) {
		t.Fatalf("extraction span not linked to the request's trace: %+v", spans[0].Links())
	}
	if v, ok := telemetrytest.Attr(spans[0], "recall.session"); !ok || v.AsString() != "s1" {
		t.Fatalf("recall.session = %v", v)
	}
	commit := rec.WaitFor(t, "memory.commit", 1, 10*time.Second)
	if v, ok := telemetrytest.Attr(commit[0], telemetry.GenAIOperation); !ok || v.AsString() != telemetry.OpUpdateMemory {
		t.Fatalf("memory.commit %s = %v, want %s (the GenAI conventions' name beside Recall's)", telemetry.GenAIOperation, v, telemetry.OpUpdateMemory)
	}
	if v, ok := telemetrytest.Attr(commit[0], telemetry.GenAIConversationID); !ok || v.AsString() != "s1" {
		t.Fatalf("memory.commit %s = %v, want s1", telemetry.GenAIConversationID, v)
	}
	met.WaitForValue(t, "recall_extractions_total", 1, 5*time.Second, attribute.String("outcome", OutcomeCompleted))
	if v, ok := met.Value(t, "recall_extraction_tokens_total", attribute.String("kind", "input")); !ok || v == 0 {
		t.Fatalf("input tokens metric = %v, %v", v, ok)
	}
	if v, ok := met.Value(t, "recall_extractor_partitions_owned", attribute.String("worker", "w1")); !ok || int(v) != len(w.w.Group().Owned()) {
		t.Fatalf("partitions owned metric = %v, %v (owns %v)", v, ok, w.w.Group().Owned())
	}
}
