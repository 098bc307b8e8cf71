// Package claimcheck stores the body of an event too large for one
// transcript record in the events.BucketBlobs Object Store and builds the
// stub record published in its place (events.ExtBlob and its siblings,
// the data cut to a preview). The ingest service and pkg/client's direct
// publishers both use it, so a stub is built one way.
//
// The object is stored before the stub is returned: a published stub never
// names a missing object. The object's name is derived from the tenant,
// session, event id and data digest (events.BlobName), so a resend of the
// same event writes nothing new. A Checker is safe for concurrent use.
package claimcheck

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
)

// Store is what the claim check needs from the events.BucketBlobs Object
// Store (a jetstream.ObjectStore).
type Store interface {
	GetInfo(ctx context.Context, name string, opts ...jetstream.GetObjectInfoOpt) (*jetstream.ObjectInfo, error)
	PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error)
}

// Checker stores the bodies of events over Inline bytes in Store, each
// write bounded by Timeout, and turns their records into stubs. A nil
// Checker stores nothing: Check returns every message as is.
type Checker struct {
	Store   Store
	Inline  int
	Timeout time.Duration
}

// ErrStubTooLarge is the error of an event whose attributes alone are
// over the inline size: the claim check moves only the data.
var ErrStubTooLarge = errors.New("event attributes (headers, extensions) are too large for one transcript record even with the data stored apart")

// ErrNotStored wraps a failed object store write: no record may be
// published for the event; retrying is safe.
var ErrNotStored = errors.New("the event's body could not be stored; nothing of it was stored, retry (the id makes the retry safe)")

// MsgSize is the size the server counts for m: data and headers.
func MsgSize(m *nats.Msg) int {
	n := len(m.Data)
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// Check returns m itself when it fits inline; otherwise it stores the
// event's data as an object (unless the same bytes are stored under its
// name already: a re-sent event) and returns the stub record to publish in
// its place. The object is stored before the stub is returned, so a
// published stub never names a missing object. Errors wrap ErrNotStored
// (retry) or are ErrStubTooLarge (permanent).
func (c *Checker) Check(ctx context.Context, tenant string, s *events.Session, m *nats.Msg) (*nats.Msg, error) {
	out, _, err := c.CheckStored(ctx, tenant, s, m)
	return out, err
}

// Blob is the object a Check stored for one event: its name, and whether
// this Check wrote it (false: the same bytes were there already, so an
// earlier record may name it). The zero Blob is an event kept inline.
type Blob struct {
	Name    string
	Created bool
}

// CheckStored is Check that also says which object the stub names and
// whether this call created it, for a caller that removes the object of an
// event the stream then answers as a duplicate.
func (c *Checker) CheckStored(ctx context.Context, tenant string, s *events.Session, m *nats.Msg) (*nats.Msg, Blob, error) {
	if c == nil || MsgSize(m) <= c.Inline {
		return m, Blob{}, nil
	}
	data := m.Data
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	cc := events.ClaimCheck{Object: events.BlobName(tenant, s.Session, s.Event.ID(), hexSum), Size: int64(len(data)), SHA256: hexSum}
	stub := s.Event.Clone()
	stub.DataEncoded = []byte("{}")
	if s.Message != nil {
		cc.Tokens = memory.EstimateMessage(s.Message)
		stub.DataEncoded, _ = json.Marshal(events.PreviewMessage(s.Message))
	}
	cc.SetOn(&stub)
	out := natsce.NewMsg(m.Subject, &stub)
	if MsgSize(out) > c.Inline {
		return nil, Blob{}, ErrStubTooLarge
	}
	created, err := c.put(ctx, cc.Object, data, sum)
	if err != nil {
		return nil, Blob{}, err
	}
	return out, Blob{Name: cc.Object, Created: created}, nil
}

// put stores data under name, within the publish timeout, unless an object
// with the same digest is there already; created says it stored it.
func (c *Checker) put(ctx context.Context, name string, data []byte, sum [sha256.Size]byte) (created bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	info, err := c.Store.GetInfo(ctx, name)
	switch {
	case err == nil && info.Digest == "SHA-256="+base64.URLEncoding.EncodeToString(sum[:]):
		return false, nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return false, fmt.Errorf("%w: reading object %s of %s: %v", ErrNotStored, name, events.BucketBlobs, err)
	}
	if _, err := c.Store.PutBytes(ctx, name, data); err != nil {
		return false, fmt.Errorf("%w: storing object %s in %s: %v", ErrNotStored, name, events.BucketBlobs, err)
	}
	return true, nil
}

// InlineLimit is the largest event published inline on a connection whose
// server takes maxPayload bytes a message, at most configured: a record
// leaves room for the headers JetStream and the ingest add (64 KiB, or a
// quarter of a small max_payload), so a server configured with a small
// max_payload still takes events below it inline instead of claim-checking
// every event into stubs that cannot fit either.
func InlineLimit(maxPayload int64, configured int) int {
	room := min(int(maxPayload)/4, 64<<10)
	return min(configured, int(maxPayload)-room)
}
