package console

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// TestSeriesSpansTheWholeSession: a 200,000-record session interleaved
// with other sessions (every third stream sequence is its own), compacted
// every 20,000 records, keeps a bounded series whose points start at its
// first record and end at its newest, with every compaction's peak, and
// counts positions within the session.
func TestSeriesSpansTheWholeSession(t *testing.T) {
	msg, _ := json.Marshal(events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "run the next migration batch please"}}})
	comp, _ := json.Marshal(events.SessionCompacted{PreTokens: 1000, PostTokens: 10})
	s := &series{}
	const n = 200_000
	var peaks []uint64
	for i := range n {
		seq := uint64(1000 + 3*i)
		m := transcript.Raw{Seq: seq, Header: nats.Header{"ce-type": {events.TypeMessage}}, Data: msg}
		if i > 0 && i%20_000 == 0 {
			peaks = append(peaks, seq-3)
			m.Header.Set("ce-type", events.TypeSessionCompacted)
			m.Data = comp
		}
		if i%10_000 == 0 {
			s = s.clone()
		}
		s.add(m)
	}
	if len(s.buckets) > maxBuckets {
		t.Fatalf("%d buckets", len(s.buckets))
	}
	pts := s.points(maxPoints)
	if len(pts) > maxPoints+1 || pts[0].Seq != 1000 || pts[0].Pos != 1 || pts[len(pts)-1].Seq != 1000+3*(n-1) || pts[len(pts)-1].Pos != n {
		t.Fatalf("%d points from %+v to %+v", len(pts), pts[0], pts[len(pts)-1])
	}
	for _, peak := range peaks {
		found := false
		for _, p := range pts {
			found = found || p.Seq == peak
		}
		if !found {
			t.Errorf("the peak before the compaction at seq %d is lost", peak+3)
		}
	}
	if len(s.compactions) != len(peaks) {
		t.Fatalf("compactions %d", len(s.compactions))
	}
	if pos, _ := s.position(1000 + 3*99_999); pos < 100_000 || pos > 100_000+int(s.width) {
		t.Fatalf("position of the 100,000th record: %d", pos)
	}
	small := &series{}
	for i := range 10 {
		small.add(transcript.Raw{Seq: uint64(5 + 2*i), Header: nats.Header{"ce-type": {events.TypeMessage}}, Data: msg})
	}
	if pos, exact := small.position(9); pos != 3 || !exact {
		t.Fatalf("position of seq 9: %d %v", pos, exact)
	}
}
