package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/pkg/events"
)

// field is a position in a stored JSON document: its path and whether it
// is a "from" position (see positions).
type field struct {
	path []string
	from bool
}

// kvSpec says which records of a bucket hold positions and where.
type kvSpec struct {
	bucket string
	// keys filters the bucket's keys ("<prefix>.>" or ">").
	keys string
	// parse returns the session a key's record belongs to and, for a key
	// that carries a position, that position; ok false skips the key.
	parse  func(key string) (tenant, session string, pos uint64, ok bool)
	fields []field
	// rename is the key of a record whose key carries its first field's
	// position (nil: the key does not change).
	rename func(tenant, session string, pos uint64) string
}

// kvSpecs are every stored position outside the transcript streams
// (events.MemoryRecord, events.SessionIndex, events.CommitRecord,
// parked.Commit, parked.Parked). The buckets' other keys (index names and
// leases, commit leases, invalid parked requests) hold none.
var kvSpecs = []kvSpec{
	{bucket: events.BucketMemory, keys: ">", parse: sessionKey,
		fields: []field{{path: []string{"covered_seq"}}, {path: []string{"last_summarized_seq"}}, {path: []string{"context_seq"}, from: true}}},
	{bucket: events.BucketIndex, keys: ">", parse: sessionKey,
		fields: []field{{path: []string{"last_indexed_seq"}}, {path: []string{"read_from_seq"}, from: true}}},
	{bucket: events.BucketLTMState, keys: "commits.>", parse: prefixedKey("commits."),
		fields: []field{{path: []string{"last_seq"}}}},
	{bucket: events.BucketLTMState, keys: events.ParkedCommitPrefix + ".>", parse: positionKey(events.ParkedCommitPrefix + "."),
		fields: []field{{path: []string{"up_to"}}}, rename: events.ParkedCommitKey},
	{bucket: events.BucketParked, keys: ">", parse: positionKey(""),
		fields: []field{{path: []string{"request", "up_to_seq"}}}, rename: parked.Key},
}

// kvCaches are buckets of caches whose entries hold legacy positions and
// that the services rebuild: trigger snapshots (a session's state is
// replayed from its records) and extraction status records (liveness
// markers with a TTL; no extraction runs while the services are stopped).
// They are emptied.
var kvCaches = []string{events.BucketTriggerState, events.BucketStatus}

// sessionKey parses "<tenant>.<session>".
func sessionKey(key string) (string, string, uint64, bool) {
	t, s, ok := strings.Cut(key, ".")
	return t, s, 0, ok && events.ValidateID(t) == nil && events.ValidateID(s) == nil
}

// prefixedKey parses "<prefix><tenant>.<session>".
func prefixedKey(prefix string) func(string) (string, string, uint64, bool) {
	return func(key string) (string, string, uint64, bool) {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			return "", "", 0, false
		}
		return sessionKey(rest)
	}
}

// positionKey parses "<prefix><tenant>.<session>.<position>".
func positionKey(prefix string) func(string) (string, string, uint64, bool) {
	return func(key string) (string, string, uint64, bool) {
		rest, ok := strings.CutPrefix(key, prefix)
		i := strings.LastIndexByte(rest, '.')
		if !ok || i < 0 {
			return "", "", 0, false
		}
		pos, err := strconv.ParseUint(rest[i+1:], 10, 64)
		t, s, _, ok := sessionKey(rest[:i])
		return t, s, pos, ok && err == nil
	}
}

// kvItem is a record to translate, as it was read.
type kvItem struct {
	spec            *kvSpec
	key             string
	tenant, session string
	pos             uint64 // the key's position
	rev             uint64
	marks           []*mark // one per spec field
}

// collectKV reads every record that holds positions and has not been
// translated yet, and registers its positions.
func (m *Migrator) collectKV(ctx context.Context, p *positions) ([]*kvItem, error) {
	var items []*kvItem
	for i := range kvSpecs {
		spec := &kvSpecs[i]
		err := m.lastPerKey(ctx, spec.bucket, spec.keys, func(key string, rev uint64, h nats.Header, data []byte) error {
			tenant, session, pos, ok := spec.parse(key)
			if !ok || h.Get(HeaderTranslated) != "" {
				return nil
			}
			doc, err := decodeDoc(data)
			if err != nil {
				m.log.Warn("left a record that does not decode", "bucket", spec.bucket, "key", key, "err", err)
				return nil
			}
			it := &kvItem{spec: spec, key: key, tenant: tenant, session: session, pos: pos, rev: rev}
			for _, f := range spec.fields {
				v, err := getPath(doc, f.path)
				if err != nil {
					return fmt.Errorf("%s.%s: %w", spec.bucket, key, err)
				}
				it.marks = append(it.marks, p.add(tenant, session, v, f.from))
			}
			items = append(items, it)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return items, nil
}

// lastPerKey calls fn with the newest value of every live key of bucket
// matching keys, in one ordered read.
func (m *Migrator) lastPerKey(ctx context.Context, bucket, keys string, fn func(key string, rev uint64, h nats.Header, data []byte) error) error {
	s, err := m.bulk.Stream(ctx, "KV_"+bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", bucket, err)
	}
	prefix := "$KV." + bucket + "."
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{prefix + keys}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return fmt.Errorf("reading %s: %w", bucket, err)
	}
	if oc.CachedInfo().NumPending == 0 {
		return nil
	}
	it, err := oc.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return fmt.Errorf("reading %s: %w", bucket, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("reading %s: %w", bucket, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("reading %s: %w", bucket, err)
		}
		if msg.Headers().Get("KV-Operation") == "" {
			if err := fn(strings.TrimPrefix(msg.Subject(), prefix), md.Sequence.Stream, msg.Headers(), msg.Data()); err != nil {
				return err
			}
		}
		if md.NumPending == 0 {
			return nil
		}
	}
}

// applyKV writes the translated records: in key-position order within a
// session, so that a renamed key never lands on a key not translated yet
// (a position only ever translates to a lower or equal one).
func (m *Migrator) applyKV(ctx context.Context, items []*kvItem, p *positions) error {
	slices.SortStableFunc(items, func(a, b *kvItem) int {
		return cmp.Or(strings.Compare(a.spec.bucket, b.spec.bucket), strings.Compare(a.tenant, b.tenant),
			strings.Compare(a.session, b.session), cmp.Compare(a.pos, b.pos))
	})
	for i, it := range items {
		if err := m.applyKVItem(ctx, it, p); err != nil {
			return err
		}
		m.progress("translate", int64(i+1), int64(len(items)))
		if err := m.at("translate", int64(i+1)); err != nil {
			return err
		}
	}
	return nil
}

// applyKVItem translates one record with a compare-and-set on the
// revision it was read at.
func (m *Migrator) applyKVItem(ctx context.Context, it *kvItem, p *positions) error {
	bucket := it.spec.bucket
	raw, err := m.lastMsg(ctx, bucket, it.key)
	if err != nil {
		return err
	}
	if raw == nil || raw.Sequence != it.rev {
		return fmt.Errorf("%s.%s: %w", bucket, it.key, errChanged)
	}
	doc, err := decodeDoc(raw.Data)
	if err != nil {
		return fmt.Errorf("%s.%s: %w", bucket, it.key, err)
	}
	changed := false
	for i, f := range it.spec.fields {
		if v := p.value(it.marks[i]); v != it.marks[i].legacy {
			if err := setPath(doc, f.path, v); err != nil {
				return fmt.Errorf("%s.%s: %w", bucket, it.key, err)
			}
			changed = true
		}
	}
	key := it.key
	if it.spec.rename != nil {
		pos := p.value(it.marks[0])
		if pos == 0 {
			m.log.Warn("dropped a record whose transcript records are gone", "bucket", bucket, "key", it.key)
			m.rep.Dropped[bucket]++
			return m.deleteKV(ctx, bucket, it.key, it.rev)
		}
		key = it.spec.rename(it.tenant, it.session, pos)
	}
	if key != it.key {
		return m.moveKV(ctx, it, doc, key)
	}
	if !changed {
		return nil // translating it again gives the same
	}
	if err := m.putKV(ctx, bucket, key, doc, "translated", it.rev); err != nil {
		return err
	}
	m.rep.Translated[bucket]++
	return nil
}
