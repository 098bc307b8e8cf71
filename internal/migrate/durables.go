package migrate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// priorityGroup is the pinned priority group of every service's durable
// on the transcript (triggersvc, indexersvc and longtermsvc PriorityGroup).
const priorityGroup = "recall"

// legacyTriggerPrefix names the trigger's durables of session partitions
// before shards: recall-trigger-<p>-of-<n>.
const legacyTriggerPrefix = events.DurableTrigger + "-"

// followers are the services whose durable follows every shard, with the
// ack policy their durable must have (it cannot change once created).
var followers = []struct {
	durable string
	ack     jetstream.AckPolicy
}{
	{events.DurableTrigger, jetstream.AckAllPolicy},
	{events.DurableIndexer, jetstream.AckExplicitPolicy},
	{events.DurableLongTerm, jetstream.AckExplicitPolicy},
}

// legacyDurable is a durable of the legacy stream: its ack floor, and the
// sessions it was responsible for (parts 0: every session; else those of
// partition part of parts).
type legacyDurable struct {
	name        string
	floor       uint64
	part, parts int
}

// durablePlan is one service's durable on the shards: it starts, on each
// shard, at the first record its legacy durables had not all acknowledged
// (a record counts as acknowledged when every legacy durable responsible
// for its session acknowledged it, and at least one is).
type durablePlan struct {
	name   string
	ack    jetstream.AckPolicy
	base   jetstream.ConsumerConfig // a legacy durable's settings
	legacy []legacyDurable
	start  []uint64 // per shard; 0 until found
}

func (d *durablePlan) acknowledged(legacy uint64, key string) bool {
	covered := false
	for _, l := range d.legacy {
		if l.parts > 0 {
			tenant, session, _ := strings.Cut(key, ".")
			if events.SessionPartition(tenant, session, l.parts) != l.part {
				continue
			}
		}
		covered = true
		if legacy > l.floor {
			return false
		}
	}
	return covered
}

// observe takes shard k's record seq (legacy 0: not from the legacy
// stream, never acknowledged).
func (d *durablePlan) observe(k int, seq, legacy uint64, key string) {
	if d.start[k] == 0 && (legacy == 0 || !d.acknowledged(legacy, key)) {
		d.start[k] = seq
	}
}

// settle ends shard k's scan: with every record acknowledged the durable
// starts after the last.
func (d *durablePlan) settle(k int, last uint64) {
	if d.start[k] == 0 {
		d.start[k] = last + 1
	}
}

// floor is the lowest ack floor among the legacy durables (for reports).
func (d *durablePlan) floor() uint64 {
	f := d.legacy[0].floor
	for _, l := range d.legacy[1:] {
		f = min(f, l.floor)
	}
	return f
}

// legacyDurables reads the services' durables on the legacy stream; a
// service without one gets no durable (it will start from the first
// record, as it would have on the legacy stream).
func (m *Migrator) legacyDurables(ctx context.Context) ([]*durablePlan, error) {
	s, err := m.js.Stream(ctx, provision.StreamLegacyTranscript)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
	}
	plans := map[string]*durablePlan{}
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		name, l, ok := serviceOf(info.Name)
		if !ok {
			continue
		}
		l.floor = info.AckFloor.Stream
		d := plans[name]
		if d == nil {
			d = &durablePlan{name: name, base: info.Config, start: make([]uint64, m.layout.Shards())}
			plans[name] = d
		}
		if l.parts == 0 {
			d.base = info.Config // the unpartitioned durable's settings win
		}
		d.legacy = append(d.legacy, l)
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("listing the consumers of %s: %w", provision.StreamLegacyTranscript, err)
	}
	var out []*durablePlan
	for _, f := range followers {
		if d := plans[f.durable]; d != nil {
			d.ack = f.ack
			sort.Slice(d.legacy, func(i, j int) bool { return d.legacy[i].name < d.legacy[j].name })
			out = append(out, d)
		}
	}
	return out, nil
}

// serviceOf maps a legacy durable's name to its service's durable on the
// shards.
func serviceOf(name string) (string, legacyDurable, bool) {
	switch name {
	case events.DurableTrigger, events.DurableIndexer, events.DurableLongTerm:
		return name, legacyDurable{name: name}, true
	}
	rest, ok := strings.CutPrefix(name, legacyTriggerPrefix)
	if !ok {
		return "", legacyDurable{}, false
	}
	ps, ns, ok := strings.Cut(rest, "-of-")
	p, perr := strconv.Atoi(ps)
	n, nerr := strconv.Atoi(ns)
	if !ok || perr != nil || nerr != nil || n <= 0 || p < 0 || p >= n {
		return "", legacyDurable{}, false
	}
	return events.DurableTrigger, legacyDurable{name: name, part: p, parts: n}, true
}

// config is d's durable on shard k, starting at start.
func (d *durablePlan) config(k int, start uint64, shards int) jetstream.ConsumerConfig {
	b := d.base
	c := jetstream.ConsumerConfig{
		Durable:       d.name,
		Description:   fmt.Sprintf("%s (shard %d of %d, migrated)", b.Description, k, shards),
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
		AckPolicy: d.ack, AckWait: b.AckWait, MaxAckPending: b.MaxAckPending, MaxDeliver: b.MaxDeliver,
		PriorityPolicy: b.PriorityPolicy, PriorityGroups: b.PriorityGroups, PinnedTTL: b.PinnedTTL,
		Metadata: map[string]string{"recall.migrated.ack_floor": strconv.FormatUint(d.floor(), 10)},
	}
	if c.PriorityPolicy == jetstream.PriorityPolicyNone || len(c.PriorityGroups) == 0 {
		c.PriorityPolicy, c.PriorityGroups = jetstream.PriorityPolicyPinned, []string{priorityGroup}
	}
	return c
}

// createDurables creates every planned durable on every shard; one that
// exists (an earlier run made it) is kept.
func (m *Migrator) createDurables(ctx context.Context, plans []*durablePlan) error {
	var n int64
	for _, d := range plans {
		for k, start := range d.start {
			name := events.TranscriptShardStream(k)
			s, err := m.js.Stream(ctx, name)
			if err != nil {
				return fmt.Errorf("reading stream %s: %w", name, err)
			}
			ds := DurableStart{Durable: d.name, Shard: k, LegacyFloor: d.floor(), StartSeq: start}
			c, err := s.Consumer(ctx, d.name)
			switch {
			case err == nil:
				ds.Existed, ds.StartSeq = true, c.CachedInfo().Config.OptStartSeq
			case errors.Is(err, jetstream.ErrConsumerNotFound):
				if _, err := s.CreateConsumer(ctx, d.config(k, start, len(d.start))); err != nil {
					return fmt.Errorf("creating durable %s on %s: %w", d.name, name, err)
				}
			default:
				return fmt.Errorf("reading durable %s on %s: %w", d.name, name, err)
			}
			m.rep.Durables = append(m.rep.Durables, ds)
			n++
			if err := m.at("durable", n); err != nil {
				return err
			}
		}
	}
	return nil
}
