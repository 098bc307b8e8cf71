package indexersvc

import (
	"context"

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
	r, stubs *transcript.Reader
}

func newReads(nc *nats.Conn, layout events.Layout, batch int) *reads {
	r := transcript.NewReader(nc, layout).WithBatch(batch)
	return &reads{r: r, stubs: r.Stubs()}
}

// LastSeq is transcript.Reader.LastSeq.
func (b *reads) LastSeq(ctx context.Context, tenant, session string) (uint64, error) {
	return b.r.LastSeq(ctx, tenant, session)
}

// Scan is transcript.Reader.Scan in batches of the lane's size:
// claim-checked records resolved one at a time.
func (b *reads) Scan(ctx context.Context, tenant, session string, from, to uint64, fn func(transcript.Record) bool) error {
	return b.r.Scan(ctx, tenant, session, from, to, fn)
}

// ScanStubs is Scan leaving claim-checked records as their stubs (their
// preview), never fetching a large body.
func (b *reads) ScanStubs(ctx context.Context, tenant, session string, from, to uint64, fn func(transcript.Record) bool) error {
	return b.stubs.Scan(ctx, tenant, session, from, to, fn)
}
