package ingestsvc

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	Delete(ctx context.Context, name string) error
}

// claimChecker stores the bodies of events over inline bytes in an Object
// Store and turns their records into stubs (see events.ExtBlob).
type claimChecker struct {
	store   BlobStore
	inline  int
	timeout time.Duration
	// records reads a stored record when a claim-checked event turns out
	// a duplicate (a connection apart from publishing: records can be
	// large); nil keeps the objects of duplicates.
	records *nats.Conn
	log     *slog.Logger
}

// blob is the object a request stored for one of its events.
type blob struct {
	name    string
	created bool // this request wrote it (it was not there before)
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
// (retry) or are errStubTooLarge (permanent). The blob says which object
// the stub names.
func (c *claimChecker) check(ctx context.Context, tenant string, s *events.Session, m *nats.Msg) (*nats.Msg, blob, error) {
	if c == nil || msgSize(m) <= c.inline {
		return m, blob{}, nil
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
		return nil, blob{}, errStubTooLarge
	}
	created, err := c.put(ctx, cc.Object, data, sum)
	if err != nil {
		return nil, blob{}, err
	}
	return out, blob{name: cc.Object, created: created}, nil
}

// put stores data under name, within the publish timeout, unless an object
// with the same digest is there already; created says it stored it.
func (c *claimChecker) put(ctx context.Context, name string, data []byte, sum [sha256.Size]byte) (created bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	info, err := c.store.GetInfo(ctx, name)
	switch {
	case err == nil && info.Digest == "SHA-256="+base64.URLEncoding.EncodeToString(sum[:]):
		return false, nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return false, fmt.Errorf("%w: reading object %s of %s: %v", errBlobNotStored, name, events.BucketBlobs, err)
	}
	if _, err := c.store.PutBytes(ctx, name, data); err != nil {
		return false, fmt.Errorf("%w: storing object %s in %s: %v", errBlobNotStored, name, events.BucketBlobs, err)
	}
	return true, nil
}

// dropDuplicate removes the object b a request stored for an event that
// JetStream answered as a duplicate of the record at seq in stream: a
// duplicate stores nothing. The object stays when this request did not
// create it (an earlier record may name it) or when the stored record
// names it (a concurrent request with the same body); when the record
// cannot be read it stays too, logged — a leak until the session's erase
// or max age, never a record naming a missing object.
func (c *claimChecker) dropDuplicate(ctx context.Context, stream string, seq uint64, b blob) {
	if c == nil || c.records == nil || !b.created {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	named, err := c.storedObject(ctx, stream, seq)
	if err == nil && named != b.name {
		err = c.store.Delete(ctx, b.name)
	}
	if err != nil {
		c.log.WarnContext(ctx, "kept the claim-check object of a duplicate event", "object", b.name, "stream", stream, "seq", seq, "err", err)
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
