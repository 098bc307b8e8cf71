package tenantcfg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

// errChanged is what Write and Patch return when the stored revision is
// not the one the precondition names: it wraps store.ErrConflict, the one
// sentinel of a lost compare-and-set.
var errChanged = fmt.Errorf("the configuration changed: the stored revision is not the expected one: %w", store.ErrConflict)

// metaMember is the member of a stored value that holds its ConfigMeta.
const metaMember = "_meta"

// Decode parses a RECALL_CONFIG value: the configuration's members, and
// "_meta" (who wrote it and when) when it was written through Write.
// Values stored before "_meta" existed (the bare configuration) decode
// with a nil meta. The configuration is checked with Parse.
func Decode(b []byte) (events.TenantConfig, *events.ConfigMeta, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return events.TenantConfig{}, nil, invalid([]events.ConfigFieldError{{Field: "", Error: "not a JSON object: " + err.Error()}})
	}
	var meta *events.ConfigMeta
	if raw, ok := members[metaMember]; ok {
		meta = new(events.ConfigMeta)
		if err := json.Unmarshal(raw, meta); err != nil {
			return events.TenantConfig{}, nil, invalid([]events.ConfigFieldError{{Field: metaMember, Error: err.Error()}})
		}
		delete(members, metaMember)
		b, _ = json.Marshal(members)
	}
	// What is stored was checked against the ceilings when it was
	// written; readers cap bounded values at use.
	c, err := unbounded.Parse(b)
	return c, meta, err
}

// encode is the stored form of c written by meta.
func encode(c events.TenantConfig, meta events.ConfigMeta) []byte {
	b, _ := json.Marshal(c)
	m, _ := json.Marshal(meta)
	if string(b) == "{}" {
		return []byte(`{"` + metaMember + `":` + string(m) + `}`)
	}
	return append(append(append(bytes.TrimSuffix(b, []byte("}")), `,"`+metaMember+`":`...), m...), '}')
}

// Precondition makes a write conditional: with Revision set it succeeds
// only when the stored revision is Revision; with None only when no
// configuration is stored; with Exists only when one is. The zero value
// writes unconditionally.
type Precondition struct {
	Revision uint64
	None     bool
	Exists   bool
}

// Entry is a tenant's stored configuration (Revision 0: none stored).
type Entry struct {
	Revision uint64
	Config   events.TenantConfig
	Meta     *events.ConfigMeta
}

// Read returns tenant's stored configuration from kv (RECALL_CONFIG); a
// tenant without one (or whose key was deleted) gets the zero Entry. A
// stored value that does not decode is an error wrapping ErrInvalid.
func Read(ctx context.Context, kv jetstream.KeyValue, tenant string) (Entry, error) {
	e, err := kv.Get(ctx, events.ConfigKey(tenant))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Entry{}, nil
	}
	if err != nil {
		return Entry{}, fmt.Errorf("reading %s of %s: %w", events.BucketConfig, tenant, err)
	}
	c, meta, err := Decode(e.Value())
	if err != nil {
		return Entry{Revision: e.Revision()}, fmt.Errorf("stored revision %d: %w", e.Revision(), err)
	}
	return Entry{Revision: e.Revision(), Config: c, Meta: meta}, nil
}

// Write validates c (an *InvalidError when it is not valid) and stores it
// as tenant's configuration in kv with meta (At set to now when zero),
// under pre (store.ErrConflict when it does not hold). It returns the
// new revision; services watching the bucket apply it within a round trip.
// The ceilings are DefaultCeilings (Ceilings.Write applies others).
func Write(ctx context.Context, kv jetstream.KeyValue, tenant string, c events.TenantConfig, meta events.ConfigMeta, pre Precondition) (uint64, error) {
	return DefaultCeilings.Write(ctx, kv, tenant, c, meta, pre)
}

// write is Write of a validated configuration.
func write(ctx context.Context, kv jetstream.KeyValue, tenant string, c events.TenantConfig, meta events.ConfigMeta, pre Precondition) (uint64, error) {
	if err := events.ValidateID(tenant); err != nil {
		return 0, fmt.Errorf("tenant: %w", err)
	}
	if meta.At.IsZero() {
		meta.At = time.Now().UTC()
	}
	key, b := events.ConfigKey(tenant), encode(c, meta)
	if pre.Exists && pre.Revision == 0 {
		cur, err := Read(ctx, kv, tenant)
		if err != nil && !errors.Is(err, ErrInvalid) {
			return 0, err
		}
		if cur.Revision == 0 {
			return 0, errChanged
		}
		pre.Revision = cur.Revision
	}
	var rev uint64
	var err error
	switch {
	case pre.None:
		rev, err = kv.Create(ctx, key, b)
	case pre.Revision > 0:
		rev, err = kv.Update(ctx, key, b, pre.Revision)
	default:
		rev, err = kv.Put(ctx, key, b)
	}
	if store.IsConflict(err) {
		return 0, fmt.Errorf("%w (%w)", errChanged, err)
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s of %s: %w", events.BucketConfig, tenant, err)
	}
	return rev, nil
}

// Patch applies patch, a JSON merge patch (RFC 7396), to tenant's stored
// configuration and writes the result like Write. With pre.Revision set
// the stored revision must be that one; otherwise the revision read is
// the precondition, and a concurrent change makes Patch read and apply
// the patch again (a few times, then store.ErrConflict). It returns
// the entry written. The ceilings are DefaultCeilings (Ceilings.Patch
// applies others).
func Patch(ctx context.Context, kv jetstream.KeyValue, tenant string, patch []byte, meta events.ConfigMeta, pre Precondition) (Entry, error) {
	return DefaultCeilings.Patch(ctx, kv, tenant, patch, meta, pre)
}

// Patch is the package's Patch under l.
func (l Ceilings) Patch(ctx context.Context, kv jetstream.KeyValue, tenant string, patch []byte, meta events.ConfigMeta, pre Precondition) (Entry, error) {
	if meta.At.IsZero() {
		meta.At = time.Now().UTC()
	}
	for range 3 {
		cur, err := Read(ctx, kv, tenant)
		if err != nil && !errors.Is(err, ErrInvalid) {
			return Entry{}, err
		}
		if (pre.Revision > 0 && cur.Revision != pre.Revision) || (pre.None && cur.Revision != 0) || (pre.Exists && cur.Revision == 0) {
			return Entry{}, errChanged
		}
		doc, _ := json.Marshal(cur.Config)
		merged, err := MergePatch(doc, patch)
		if err != nil {
			return Entry{}, invalid([]events.ConfigFieldError{{Field: "", Error: err.Error()}})
		}
		c, err := l.Parse(merged)
		if err != nil {
			return Entry{}, err
		}
		at := Precondition{Revision: cur.Revision, None: cur.Revision == 0}
		rev, err := l.Write(ctx, kv, tenant, c, meta, at)
		if !errors.Is(err, store.ErrConflict) || pre.Revision > 0 || pre.None || pre.Exists {
			return Entry{Revision: rev, Config: c, Meta: &meta}, err
		}
	}
	return Entry{}, errChanged
}

// MergePatch applies a JSON merge patch (RFC 7396) to doc: members of an
// object patch replace doc's, null removes them, and any other patch
// replaces doc whole.
func MergePatch(doc, patch []byte) ([]byte, error) {
	var d, p any
	if err := unmarshalNumbers(patch, &p); err != nil {
		return nil, fmt.Errorf("merge patch: %w", err)
	}
	if len(bytes.TrimSpace(doc)) > 0 {
		if err := unmarshalNumbers(doc, &d); err != nil {
			return nil, fmt.Errorf("merge patch target: %w", err)
		}
	}
	return json.Marshal(mergeValue(d, p))
}

func mergeValue(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergeValue(tm[k], v)
	}
	return tm
}

// unmarshalNumbers decodes b into v keeping numbers as json.Number, so
// large integers survive.
func unmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
