package natsce_test

import (
	"testing"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// BenchmarkNewMsg measures binary-mode encoding of a transcript event.
func BenchmarkNewMsg(b *testing.B) {
	evs := benchgen.New(1).Interleaved(benchgen.SessionIDs("s", 50), 1000)
	for i := range evs {
		evs[i].SetExtension(events.ExtTenant, "bench")
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := &evs[i%len(evs)]
		_ = natsce.NewMsg(events.NewLayout(events.DefaultShards).Subject("bench", e.Subject()), e)
	}
}

// BenchmarkDecode measures decoding a stored binary-mode message back into
// an event (what consumers of the transcript do per record).
func BenchmarkDecode(b *testing.B) {
	evs := benchgen.New(1).Interleaved(benchgen.SessionIDs("s", 50), 1000)
	msgs := make([]struct {
		h    map[string][]string
		data []byte
	}, len(evs))
	for i := range evs {
		evs[i].SetExtension(events.ExtTenant, "bench")
		m := natsce.NewMsg("x", &evs[i])
		msgs[i].h, msgs[i].data = m.Header, m.Data
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m := msgs[i%len(msgs)]
		if _, err := natsce.Decode(m.h, m.data); err != nil {
			b.Fatal(err)
		}
	}
}
