package memory_test

import (
	"testing"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// triggerRecords returns n realistic records of one session, reduced for
// the trigger.
func triggerRecords(n int) []memory.TriggerRecord {
	g := benchgen.New(1)
	recs := make([]memory.TriggerRecord, n)
	for i := range recs {
		m := g.Message("s000001")
		recs[i] = memory.MessageRecord(uint64(i+1), int64(i+1)*1e6, &m)
	}
	return recs
}

// BenchmarkTriggerObserve measures one decision step of the trigger state
// machine (a realistic record of a session that makes decisions).
func BenchmarkTriggerObserve(b *testing.B) {
	recs := triggerRecords(4096)
	th := memory.DefaultThresholds()
	var s memory.TriggerState
	out := make([]memory.TriggerDecision, 0, 4)
	b.ReportAllocs()
	var seq uint64
	for i := 0; b.Loop(); i++ {
		r := recs[i%len(recs)]
		seq++
		r.Seq = seq
		out = s.Observe(r, &th, out[:0])
	}
}

// BenchmarkMessageRecord measures reducing a decoded message to a trigger
// record (token estimate included).
func BenchmarkMessageRecord(b *testing.B) {
	g := benchgen.New(1)
	msgs := make([]events.Message, 1000)
	for i := range msgs {
		msgs[i] = g.Message("s000001")
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = memory.MessageRecord(uint64(i+1), 1, &msgs[i%len(msgs)])
	}
}
