package migrate

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// A position stored outside the transcript is a legacy sequence of one
// session's records. A session's records keep their order in its shard,
// so a position translates to the shard sequence of the record that plays
// the same role:
//
//   - an "up to" position (covered, last summarized, last indexed, last
//     committed, a request's up_to) becomes the shard sequence of the
//     session's newest record at or below it, or 0 when there is none;
//   - a "from" position (where the next read starts) becomes the shard
//     sequence of the session's oldest record at or above it, or the
//     shard's end + 1 when there is none.
//
// Both are found in one pass over every shard's headers (HeaderMigratedFrom
// and the subject), which also finds where each service's durable starts.

// mark is one position to translate.
type mark struct {
	legacy uint64
	from   bool // a "from" position; else "up to"
	shard  int
	got    uint64
	found  bool
}

// observe is called with the session's records in order.
func (k *mark) observe(legacy, seq uint64) {
	switch {
	case !k.from && legacy <= k.legacy:
		k.got = seq
	case k.from && !k.found && legacy >= k.legacy:
		k.got, k.found = seq, true
	}
}

// positions collects the marks and durables one scan translates.
type positions struct {
	layout   events.Layout
	marks    map[string][]*mark // by "<tenant>.<session>"
	ends     []uint64           // each shard's last sequence at the scan
	durables []*durablePlan
	migrated int64 // records that came from the legacy stream
	foreign  int64 // records that did not
}

func newPositions(l events.Layout) *positions {
	return &positions{layout: l, marks: map[string][]*mark{}, ends: make([]uint64, l.Shards())}
}

// add registers a position of a session; 0 stays 0.
func (p *positions) add(tenant, session string, legacy uint64, from bool) *mark {
	k := &mark{legacy: legacy, from: from, shard: p.layout.Shard(tenant, session)}
	if legacy > 0 {
		key := events.MemoryKey(tenant, session)
		p.marks[key] = append(p.marks[key], k)
	}
	return k
}

// value is k's translation (valid after the scan).
func (p *positions) value(k *mark) uint64 {
	switch {
	case k.legacy == 0:
		return 0
	case k.from && !k.found:
		return p.ends[k.shard] + 1
	}
	return k.got
}

// scan reads every shard's headers once.
func (m *Migrator) scan(ctx context.Context, p *positions) error {
	for k := range p.ends {
		if err := m.scanShard(ctx, p, k); err != nil {
			return err
		}
		for _, d := range p.durables {
			d.settle(k, p.ends[k])
		}
	}
	m.rep.Foreign = p.foreign
	m.rep.Present = max(p.migrated-m.rep.Copied, 0)
	return nil
}

// scanShard reads shard k's headers in order.
func (m *Migrator) scanShard(ctx context.Context, p *positions, k int) error {
	prefix := events.SubjectTranscriptRoot + "." + strconv.Itoa(k) + "."
	last, err := m.eachHeader(ctx, events.TranscriptShardStream(k), func(seq uint64, subject string, h nats.Header) {
		p.observe(k, seq, strings.TrimPrefix(subject, prefix), h.Get(HeaderMigratedFrom))
	})
	p.ends[k] = last
	return err
}

// eachHeader calls fn with every record of stream (headers and subject
// only), in order, on the bulk connection, and returns the stream's last
// sequence.
func (m *Migrator) eachHeader(ctx context.Context, stream string, fn func(seq uint64, subject string, h nats.Header)) (uint64, error) {
	s, err := m.bulk.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", stream, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return st.LastSeq, nil
	}
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", stream, err)
	}
	it, err := oc.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", stream, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return 0, fmt.Errorf("reading stream %s: %w", stream, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return 0, fmt.Errorf("reading stream %s: %w", stream, err)
		}
		fn(md.Sequence.Stream, msg.Subject(), msg.Headers())
		if md.NumPending == 0 {
			return st.LastSeq, nil
		}
	}
}

// observe takes shard k's record seq of session key; from is its
// HeaderMigratedFrom ("" for a record that did not come from the legacy
// stream).
func (p *positions) observe(k int, seq uint64, key, from string) {
	legacy, err := strconv.ParseUint(from, 10, 64)
	if from == "" || err != nil {
		p.foreign++
		for _, d := range p.durables {
			d.observe(k, seq, 0, "")
		}
		return
	}
	p.migrated++
	for _, mk := range p.marks[key] {
		mk.observe(legacy, seq)
	}
	for _, d := range p.durables {
		d.observe(k, seq, legacy, key)
	}
}
