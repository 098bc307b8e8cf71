// Package store is Recall's typed access to its KV buckets: reading and
// decoding a session's memory record, committing it with a compare-and-set,
// and writes with a per-key TTL through the subject nats.go's KV would use
// (JetStream API prefix and domain included).
//
// Errors: a missing record is not an error (zero record, revision 0); a
// record that does not decode is ErrCorrupt, wrapped with the key and
// revision; a lost compare-and-set is ErrConflict.
//
// The conflict rule is this package's for every compare-and-set in the
// tree (KV create, update, and publishes with an expected last subject
// sequence): IsConflict recognizes a lost race however the server words
// it, and CAS turns one into ErrConflict, the one sentinel callers test
// with errors.Is.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

var (
	// ErrCorrupt marks a stored value that does not decode.
	ErrCorrupt = errors.New("stored value does not decode")
	// ErrConflict marks a compare-and-set that lost: the key is not at the
	// expected revision any more.
	ErrConflict = errors.New("the record changed since it was read")
)

// Memory is the session memory bucket (events.BucketMemory). It is safe
// for concurrent use.
type Memory struct {
	kv jetstream.KeyValue
}

// NewMemory wraps an opened memory bucket.
func NewMemory(kv jetstream.KeyValue) *Memory { return &Memory{kv: kv} }

// KV is the underlying bucket (watches, history).
func (m *Memory) KV() jetstream.KeyValue { return m.kv }

// Get returns the session's memory record and its revision; a session
// without memory yields a zero record and revision 0.
func (m *Memory) Get(ctx context.Context, tenant, session string) (events.MemoryRecord, uint64, error) {
	e, err := m.kv.Get(ctx, events.MemoryKey(tenant, session))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return events.MemoryRecord{}, 0, nil
	}
	if err != nil {
		return events.MemoryRecord{}, 0, fmt.Errorf("reading session memory: %w", err)
	}
	rec, err := DecodeMemory(e.Key(), e.Revision(), e.Value())
	return rec, e.Revision(), err
}

// DecodeMemory decodes a stored memory record; its error wraps ErrCorrupt.
func DecodeMemory(key string, rev uint64, value []byte) (events.MemoryRecord, error) {
	var rec events.MemoryRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return events.MemoryRecord{}, fmt.Errorf("decoding session memory %s revision %d: %w: %v", key, rev, ErrCorrupt, err)
	}
	return rec, nil
}

// Commit writes rec if the session's memory is still at revision rev (0: it
// must not exist) and returns the new revision; a lost race is ErrConflict.
func (m *Memory) Commit(ctx context.Context, tenant, session string, rec events.MemoryRecord, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encoding session memory: %w", err)
	}
	key := events.MemoryKey(tenant, session)
	var n uint64
	if rev == 0 {
		n, err = m.kv.Create(ctx, key, b)
	} else {
		n, err = m.kv.Update(ctx, key, b, rev)
	}
	if err = CAS(err); errors.Is(err, ErrConflict) {
		return 0, fmt.Errorf("committing session memory at revision %d: %w", rev, err)
	}
	if err != nil {
		return 0, fmt.Errorf("committing session memory: %w", err)
	}
	return n, nil
}

// PutSubject is the subject a write to key of bucket is published on, as
// nats.go's KV computes it for a bucket that is not a mirror: with a
// non-default JetStream API prefix (a domain or an import), the prefix comes
// first.
func PutSubject(js jetstream.JetStream, bucket, key string) string {
	subject := "$KV." + bucket + "." + key
	o := js.Options()
	pre := o.APIPrefix
	if o.Domain != "" {
		pre = "$JS." + o.Domain + ".API."
	}
	if pre != "" && !strings.HasSuffix(pre, ".") {
		pre += "."
	}
	if pre == "" || pre == jetstream.DefaultAPIPrefix {
		return subject
	}
	return pre + subject
}

// PutTTL writes value to key of bucket with a per-key TTL (kv.Put and
// kv.Update would drop it) and returns the new revision. With expect > 0 the
// write happens only if the key's last revision is expect (ErrConflict
// otherwise).
func PutTTL(ctx context.Context, js jetstream.JetStream, bucket, key string, value []byte, ttl time.Duration, expect uint64) (uint64, error) {
	opts := []jetstream.PublishOpt{jetstream.WithMsgTTL(ttl)}
	if expect > 0 {
		opts = append(opts, jetstream.WithExpectLastSequencePerSubject(expect))
	}
	pa, err := js.Publish(ctx, PutSubject(js, bucket, key), value, opts...)
	if err = CAS(err); errors.Is(err, ErrConflict) {
		return 0, fmt.Errorf("writing %s.%s after revision %d: %w", bucket, key, expect, err)
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s.%s: %w", bucket, key, err)
	}
	return pa.Sequence, nil
}

// IsConflict reports whether err is a lost compare-and-set: ErrConflict,
// jetstream.ErrKeyExists (a create on a key that exists),
// jetstream.ErrKeyRevisionMismatch, or the API error of a wrong last
// subject sequence — code 10071 from a single server, 10164 from a
// replicated (R3) bucket, which neither jetstream sentinel matches.
func IsConflict(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	return errors.Is(err, ErrConflict) || errors.Is(err, jetstream.ErrKeyExists) ||
		errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}

// CAS maps the error of a compare-and-set: nil stays nil, a conflict
// (IsConflict) becomes an error that wraps ErrConflict and the server's
// error, anything else is returned as it is.
func CAS(err error) error {
	if !IsConflict(err) || errors.Is(err, ErrConflict) {
		return err
	}
	return fmt.Errorf("%w (%w)", ErrConflict, err)
}
