package triggersvc

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/transcript"
)

// directBatch is the number of records asked for per Direct Get round trip.
const directBatch = 256

// directRange calls fn for every record of stream with from <= seq <= to,
// in order, using batch Direct Get over all subjects, or only those
// matching subject when it is not empty (deleted sequences are stepped
// over). It stops early, with a nil error, when fn returns false.
func directRange(ctx context.Context, nc *nats.Conn, stream, subject string, from, to uint64, fn func(seq uint64, ts int64, subject string, h nats.Header, data []byte) bool) error {
	if to < from {
		return nil
	}
	return transcript.ScanRaw(ctx, nc, stream, subject, from, to, directBatch, func(m transcript.Raw) bool {
		var ts int64
		if !m.Time.IsZero() {
			ts = m.Time.UnixNano()
		}
		return fn(m.Seq, ts, m.Subject, m.Header, m.Data)
	})
}
