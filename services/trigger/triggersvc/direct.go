package triggersvc

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// directBatch is the number of records asked for per Direct Get round trip.
const directBatch = 256

// directRange calls fn for every stored transcript record with
// from <= seq <= to, in order, using batch Direct Get over all subjects, or
// only subject when it is not empty (deleted sequences are stepped over).
func directRange(ctx context.Context, nc *nats.Conn, subject string, from, to uint64, fn func(seq uint64, ts int64, subject string, h nats.Header, data []byte)) error {
	if to < from {
		return nil
	}
	return transcript.ScanRaw(ctx, nc, events.StreamTranscript, subject, from, to, directBatch, func(m transcript.Raw) bool {
		var ts int64
		if !m.Time.IsZero() {
			ts = m.Time.UnixNano()
		}
		fn(m.Seq, ts, m.Subject, m.Header, m.Data)
		return true
	})
}
