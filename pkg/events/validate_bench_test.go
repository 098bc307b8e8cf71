package events_test

import (
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
)

// benchEvents returns realistic transcript events (0.5–2 KB of data).
func benchEvents(n int) []event.Event {
	return benchgen.New(1).Interleaved(benchgen.SessionIDs("s", 50), n)
}

// BenchmarkValidateIngest measures ingest validation (attributes, strict
// JSON decoding of the message, block checks) per event.
func BenchmarkValidateIngest(b *testing.B) {
	evs := benchEvents(1000)
	var bytes int64
	for _, e := range evs {
		bytes += int64(len(e.Data()))
	}
	b.SetBytes(bytes / int64(len(evs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := events.ValidateIngest(evs[i%len(evs)], "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMessageValidate measures the block checks alone, on decoded
// messages.
func BenchmarkMessageValidate(b *testing.B) {
	g := benchgen.New(1)
	msgs := make([]events.Message, 1000)
	for i := range msgs {
		msgs[i] = g.Message("s000001")
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := msgs[i%len(msgs)].Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
