package migrate

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// PerMillion is the time a migration takes per million transcript records
// of 1 KiB, measured by TestMigrationThroughput (46–56 s on a shared 2-core
// machine; see its comment for the method), rounded up; Plan's estimate
// scales it.
const PerMillion = 60 * time.Second

// Plan is what a migration would do; Migrator.Plan writes nothing.
type Plan struct {
	// State is OutcomeNoLegacy, OutcomeAlready, "not started" or "under
	// way" (an interrupted migration).
	State  string
	Shards int
	// Records and Bytes are the legacy stream's; Sessions counts its
	// sessions, PerShard where they go, Skipped the records whose subject
	// is not a session's.
	Records, Bytes uint64
	Sessions       int
	PerShard       []ShardPlan
	Skipped        uint64
	// Durables are the services' legacy durables and their ack floors.
	Durables []PlannedDurable
	// Pending counts the requests waiting on each work queue.
	Pending map[string]uint64
	// Estimate is Records × PerMillion.
	Estimate time.Duration
}

// ShardPlan is one shard's share.
type ShardPlan struct {
	Records  uint64
	Sessions int
}

// PlannedDurable is a legacy durable the migration positions the shards'
// durable from.
type PlannedDurable struct {
	Name     string
	AckFloor uint64
}

// Plan counts what Run would move: the legacy records per shard (from the
// stream's per-subject counts, without reading a record), the durables and
// pending requests, and an estimate of the time it takes.
func (m *Migrator) Plan(ctx context.Context) (Plan, error) {
	p := Plan{Shards: m.layout.Shards(), PerShard: make([]ShardPlan, m.layout.Shards()), Pending: map[string]uint64{}}
	info, err := provision.LegacyTranscript(ctx, m.js)
	if err != nil || info == nil {
		p.State = string(OutcomeNoLegacy)
		return p, err
	}
	switch md := info.Config.Metadata; {
	case info.Config.Sealed && md[metaState] == stateDone:
		p.State = string(OutcomeAlready)
	case md[metaState] == stateFrozen:
		p.State = fmt.Sprintf("under way (%s shards)", md[metaShards])
	default:
		p.State = "not started"
	}
	s, err := m.js.Stream(ctx, provision.StreamLegacyTranscript)
	if err != nil {
		return p, fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
	}
	full, err := s.Info(ctx, jetstream.WithSubjectFilter(events.SubjectTranscriptRoot+".>"))
	if err != nil {
		return p, fmt.Errorf("counting the subjects of %s: %w", provision.StreamLegacyTranscript, err)
	}
	p.Records, p.Bytes = full.State.Msgs, full.State.Bytes
	var counted uint64
	for subject, n := range full.State.Subjects {
		_, tenant, session, ok := legacySession(subject)
		if !ok {
			continue
		}
		k := m.layout.Shard(tenant, session)
		p.PerShard[k].Records += n
		p.PerShard[k].Sessions++
		p.Sessions++
		counted += n
	}
	p.Skipped = p.Records - min(counted, p.Records)
	p.Estimate = time.Duration(float64(PerMillion) * float64(p.Records) / 1e6)
	return p, m.planOthers(ctx, &p)
}

// planOthers adds the legacy durables and the pending requests.
func (m *Migrator) planOthers(ctx context.Context, p *Plan) error {
	plans, err := m.legacyDurables(ctx)
	if err != nil {
		return err
	}
	for _, d := range plans {
		for _, l := range d.legacy {
			p.Durables = append(p.Durables, PlannedDurable{Name: l.name, AckFloor: l.floor})
		}
	}
	for _, spec := range reqSpecs {
		s, err := m.js.Stream(ctx, spec.stream)
		if err != nil {
			continue // no such queue: nothing pending
		}
		p.Pending[spec.stream] = s.CachedInfo().State.Msgs
	}
	return nil
}
