package client

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/claimcheck"
	"github.com/recallhq/recall/pkg/events"
)

// MaxEventBytes is the largest event the client publishes (the encoded
// data and attributes), the ingest's default limit (RECALL_INGEST_MAX_EVENT_BYTES).
const MaxEventBytes = 16 << 20

// InlineBytes is the largest event the client stores whole in its
// transcript record, as the ingest does (RECALL_INGEST_INLINE_BYTES), at
// most the server's max_payload less 64 KiB. A larger event's data goes to
// the events.BucketBlobs Object Store first, and the record published is a
// stub naming it (a claim check, events.ExtBlob): readers resolve it to
// the full event.
const InlineBytes = 512 << 10

// claimCheck returns m, or — when it is over the inline size — the stub to
// publish once its data is stored in the blob store.
func (c *Client) claimCheck(ctx context.Context, s *events.Session, m *nats.Msg) (*nats.Msg, error) {
	size := claimcheck.MsgSize(m)
	if size > MaxEventBytes {
		return nil, fmt.Errorf("%w: event %s is %d bytes, over the limit of %d", events.ErrInvalidEvent, s.Event.ID(), size, MaxEventBytes)
	}
	inline := claimcheck.InlineLimit(c.js.Conn().MaxPayload(), InlineBytes)
	if size <= inline {
		return m, nil
	}
	c.mu.Lock()
	store := c.blobs
	c.mu.Unlock()
	if store == nil {
		obs, err := c.js.ObjectStore(ctx, events.BucketBlobs)
		if err != nil {
			return nil, fmt.Errorf("opening object store %s for a claim check: %w", events.BucketBlobs, err)
		}
		c.mu.Lock()
		c.blobs = obs
		c.mu.Unlock()
		store = obs
	}
	if s.Message == nil && s.Event.Type() == events.TypeMessage {
		// CheckIngest left the message undecoded; its stub needs it.
		var err error
		if s, err = events.ValidateIngest(s.Event, c.tenant); err != nil {
			return nil, err
		}
	}
	ck := &claimcheck.Checker{Store: store, Inline: inline, Timeout: c.retryFor + c.attempt}
	out, err := ck.Check(ctx, c.tenant, s, m)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", s.Event.ID(), err)
	}
	return out, nil
}
