package ingestsvc

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

// BlobStore is what the claim check needs from the events.BucketBlobs
// Object Store (a jetstream.ObjectStore).
type BlobStore interface {
	GetInfo(ctx context.Context, name string, opts ...jetstream.GetObjectInfoOpt) (*jetstream.ObjectInfo, error)
	PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error)
}

// claimChecker stores the bodies of events over inline bytes in an Object
// Store and turns their records into stubs (see events.ExtBlob).
type claimChecker struct {
	store   BlobStore
	inline  int
	timeout time.Duration
}

// errStubTooLarge is the result error of an event whose attributes alone
// are over the inline size: the claim check moves only the data.
var errStubTooLarge = errors.New("event attributes (headers, extensions) are too large for one transcript record even with the data stored apart")

// errBlobNotStored wraps a failed object store write: the event is refused
// (503), no record is published.
var errBlobNotStored = errors.New("the event's body could not be stored; nothing of it was stored, retry (the id makes the retry safe)")

// msgSize is the size the server counts for m: data and headers.
func msgSize(m *nats.Msg) int {
	n := len(m.Data)
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// check returns m itself when it fits inline; otherwise it stores the
// event's data as an object (unless the same bytes are stored under its
// name already: a re-sent event) and returns the stub record to publish in
// its place. The object is stored before the stub is returned, so a
// published stub never names a missing object. Errors wrap errBlobNotStored
// (retry) or are errStubTooLarge (permanent).
func (c *claimChecker) check(ctx context.Context, tenant string, s *events.Session, m *nats.Msg) (*nats.Msg, error) {
	if c == nil || msgSize(m) <= c.inline {
		return m, nil
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
	if msgSize(out) > c.inline {
		return nil, errStubTooLarge
	}
	if err := c.put(ctx, cc.Object, data, sum); err != nil {
		return nil, err
	}
	return out, nil
}

// put stores data under name, within the publish timeout, unless an object
// with the same digest is there already.
func (c *claimChecker) put(ctx context.Context, name string, data []byte, sum [sha256.Size]byte) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	info, err := c.store.GetInfo(ctx, name)
	switch {
	case err == nil && info.Digest == "SHA-256="+base64.URLEncoding.EncodeToString(sum[:]):
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return fmt.Errorf("%w: reading object %s of %s: %v", errBlobNotStored, name, events.BucketBlobs, err)
	}
	if _, err := c.store.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("%w: storing object %s in %s: %v", errBlobNotStored, name, events.BucketBlobs, err)
	}
	return nil
}
