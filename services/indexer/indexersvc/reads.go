package indexersvc

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// reads is the indexer's lane for transcript reads (STYLE 21): its own
// NATS connection, apart from the one serving the API and consuming the
// transcript, and batches of a few records per round trip (batch), so the
// bytes a read has in flight are bounded and many large reads at once
// cannot get the API's connection disconnected as a slow consumer. Reads
// end with their context. It is safe for concurrent use.
type reads struct {
	nc    *nats.Conn
	r     *transcript.Reader
	batch int
}

func newReads(nc *nats.Conn, batch int) *reads {
	return &reads{nc: nc, r: transcript.NewReader(nc), batch: batch}
}

// LastSeq is transcript.Reader.LastSeq.
func (b *reads) LastSeq(ctx context.Context, tenant, session string) (uint64, error) {
	return b.r.LastSeq(ctx, tenant, session)
}

// Scan is transcript.Reader.Scan in batches of b.batch records:
// claim-checked records resolved one at a time.
func (b *reads) Scan(ctx context.Context, tenant, session string, from, to uint64, fn func(transcript.Record) bool) error {
	return b.scan(ctx, tenant, session, from, to, true, fn)
}

// ScanStubs is Scan leaving claim-checked records as their stubs (their
// preview), never fetching a large body.
func (b *reads) ScanStubs(ctx context.Context, tenant, session string, from, to uint64, fn func(transcript.Record) bool) error {
	return b.scan(ctx, tenant, session, from, to, false, fn)
}

// scan reads with transcript.ScanRaw and decodes as Reader.Scan does.
// TODO(transcript): a batch size (or max bytes) option on
// transcript.Reader would make this Reader.Scan.
func (b *reads) scan(ctx context.Context, tenant, session string, from, to uint64, resolve bool, fn func(transcript.Record) bool) error {
	subject := events.TranscriptSubject(tenant, session)
	var stop error
	err := transcript.ScanRaw(ctx, b.nc, events.StreamTranscript, subject, from, to, b.batch, func(m transcript.Raw) bool {
		rec, err := transcript.Decode(m.Header, m.Data)
		if err != nil {
			stop = fmt.Errorf("record %d of %s: %w", m.Seq, subject, err)
			return false
		}
		rec.Seq, rec.Subject, rec.Time = m.Seq, m.Subject, m.Time
		if rec.ClaimCheck != nil && resolve {
			if stop = b.r.Resolve(ctx, &rec); stop != nil {
				return false
			}
		}
		return fn(rec)
	})
	if stop != nil {
		return stop
	}
	return err
}
