package ingestsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/claimcheck"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// BlobStore is what the claim check needs from the events.BucketBlobs
// Object Store (a jetstream.ObjectStore): pkg/claimcheck's Store, and
// Delete for the objects of duplicates.
type BlobStore interface {
	claimcheck.Store
	Delete(ctx context.Context, name string) error
}

// claimChecker is pkg/claimcheck's Checker (one stub format, one inline
// limit for the ingest and pkg/client) with the ingest's duplicate
// cleanup.
type claimChecker struct {
	claimcheck.Checker
	store BlobStore
	// records reads a stored record when a claim-checked event turns out
	// a duplicate (a connection apart from publishing: records can be
	// large); nil keeps the objects of duplicates.
	records *nats.Conn
	log     *slog.Logger
}

// check is claimcheck.Checker.CheckStored; a nil checker keeps every
// event inline.
func (c *claimChecker) check(ctx context.Context, tenant string, s *events.Session, m *nats.Msg) (*nats.Msg, claimcheck.Blob, error) {
	if c == nil {
		return m, claimcheck.Blob{}, nil
	}
	return c.CheckStored(ctx, tenant, s, m)
}

// dropDuplicate removes the object b a request stored for an event that
// JetStream answered as a duplicate of the record at seq in stream: a
// duplicate stores nothing. The object stays when this request did not
// create it (an earlier record may name it) or when the stored record
// names it (a concurrent request with the same body); when the record
// cannot be read it stays too, logged — a leak until the session's erase
// or max age, never a record naming a missing object.
func (c *claimChecker) dropDuplicate(ctx context.Context, stream string, seq uint64, b claimcheck.Blob) {
	if c == nil || c.records == nil || !b.Created {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	named, err := c.storedObject(ctx, stream, seq)
	if err == nil && named != b.Name {
		err = c.store.Delete(ctx, b.Name)
	}
	if err != nil {
		c.log.WarnContext(ctx, "kept the claim-check object of a duplicate event", "object", b.Name, "stream", stream, "seq", seq, "err", err)
	}
}

// storedObject returns the object the record at seq in stream names (""
// for a record stored whole or one that is gone).
func (c *claimChecker) storedObject(ctx context.Context, stream string, seq uint64) (string, error) {
	req, _ := json.Marshal(map[string]uint64{"seq": seq})
	m, err := c.records.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, req)
	if err != nil {
		return "", fmt.Errorf("reading record %d of %s: %w", seq, stream, err)
	}
	switch st := m.Header.Get("Status"); st {
	case "":
	case "404":
		return "", nil
	default:
		return "", fmt.Errorf("reading record %d of %s: status %s %s", seq, stream, st, m.Header.Get("Description"))
	}
	e, err := natsce.Decode(m.Header, m.Data)
	if err != nil {
		return "", fmt.Errorf("decoding record %d of %s: %w", seq, stream, err)
	}
	cc, _, _ := events.ClaimCheckOf(&e)
	return cc.Object, nil
}
