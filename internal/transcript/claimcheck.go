package transcript

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// ErrBadClaimCheck means a stub names an object outside its own session,
// or the object's bytes do not match the stub's size and digest.
var ErrBadClaimCheck = errors.New("transcript: claim check does not match its object")

// fetchTimeout bounds one object fetch when the caller's context has no
// deadline.
const fetchTimeout = 30 * time.Second

// blobStore opens BucketBlobs once per Reader; a failed open is tried
// again at the next stub.
func (r *Reader) blobStore(ctx context.Context) (jetstream.ObjectStore, error) {
	if obs := r.blobs.Load(); obs != nil {
		return *obs, nil
	}
	js, err := jetstream.New(r.nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	obs, err := js.ObjectStore(ctx, events.BucketBlobs)
	if err != nil {
		return nil, fmt.Errorf("opening object store %s: %w", events.BucketBlobs, err)
	}
	r.blobs.Store(&obs)
	return obs, nil
}

// Resolve replaces the event and decoded data of a stub record (one whose
// ClaimCheck is set) by the full ones, fetched from events.BucketBlobs and
// checked against the stub's size and digest; the claim-check extensions
// are removed, so the record reads as if it had been stored whole. A record
// without a claim check is left as is.
//
// When the object no longer exists (it aged out with the transcript), the
// stub is kept — its data is the preview, ClaimCheck stays set — and nil is
// returned. Any other failure (NATS unavailable, a digest mismatch:
// ErrBadClaimCheck) is returned and rec is unchanged. Resolve is safe for
// concurrent use; each call fetches its object.
func (r *Reader) Resolve(ctx context.Context, rec *Record) error {
	cc := rec.ClaimCheck
	if cc == nil {
		return nil
	}
	tenant, session, ok := events.SplitSessionSubject(rec.Subject)
	if !ok || !events.BlobOwned(cc.Object, tenant, session) {
		return fmt.Errorf("record %d of %s names object %q: %w", rec.Seq, rec.Subject, cc.Object, ErrBadClaimCheck)
	}
	data, err := r.fetch(ctx, cc)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record %d of %s: %w", rec.Seq, rec.Subject, err)
	}
	full, err := decodeEvent(Unclaimed(rec.Event, data), data)
	if err != nil {
		return fmt.Errorf("record %d of %s, resolved: %w", rec.Seq, rec.Subject, err)
	}
	full.Seq, full.Subject, full.Time = rec.Seq, rec.Subject, rec.Time
	*rec = full
	return nil
}

// fetch reads the object of cc and checks it.
func (r *Reader) fetch(ctx context.Context, cc *events.ClaimCheck) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fetchTimeout)
		defer cancel()
	}
	obs, err := r.blobStore(ctx)
	if err != nil {
		return nil, err
	}
	data, err := obs.GetBytes(ctx, cc.Object)
	if err != nil {
		return nil, fmt.Errorf("reading object %s: %w", cc.Object, err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != cc.Size || hex.EncodeToString(sum[:]) != cc.SHA256 {
		return nil, fmt.Errorf("object %s: %d bytes, sha256 %x; the stub says %d bytes, %s: %w",
			cc.Object, len(data), sum, cc.Size, cc.SHA256, ErrBadClaimCheck)
	}
	return data, nil
}

// Unclaimed returns a copy of the stub event e with data as its data and
// without the claim-check extensions.
func Unclaimed(e event.Event, data []byte) event.Event {
	out := e.Clone()
	for _, name := range events.ClaimCheckExtensions {
		out.SetExtension(name, nil)
	}
	out.DataEncoded = data
	return out
}
