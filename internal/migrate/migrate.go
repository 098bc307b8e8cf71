// Package migrate moves a deployment whose transcript is the single legacy
// stream RECALL_TRANSCRIPT (provision.StreamLegacyTranscript, subjects
// recall.transcript.<tenant>.<session>) into the S shard streams of
// events.Layout, without losing or duplicating a record, and translates
// every position stored elsewhere from legacy sequences to shard sequences.
//
// A migration runs these steps, each safe to run again (docs/operations.md,
// "Migrating a single-stream deployment to shards"):
//
//  1. Check: the services must be stopped. A consumer with waiting pull
//     requests or a pinned client, a live membership heartbeat, or a Recall
//     micro service answering a ping means they are not; Run waits
//     Config.IdleWait for them to go, then refuses unless Config.Force.
//  2. Freeze the legacy stream: its subjects move to a private one, so a
//     writer of the old version gets an error instead of adding records the
//     copy would miss, and record the target S in its metadata (a rerun
//     with another S is refused).
//  3. Create the shard streams with a private input subject transformed to
//     their final subjects, so writers of the new version cannot interleave
//     records with the copy either.
//  4. Copy every legacy record, in legacy order, to its shard, with its
//     headers and payload, and the headers HeaderMigratedFrom (its legacy
//     sequence), HeaderMigratedFloor and HeaderMigratedTime. Each publish
//     expects the shard's last sequence (Nats-Expected-Last-Sequence), so a
//     publish that failed cannot leave a gap a later success would hide;
//     progress is read back from each shard's last record, never from a
//     checkpoint alone. Publishes are pipelined (Config.MaxInFlight).
//  5. Translate the stored positions (memory records, index entries, commit
//     records, parked extractions and commits, pending extraction and commit
//     requests) with compare-and-set writes marked HeaderTranslated, so a
//     rerun never translates twice; delete trigger snapshots and extraction
//     status records (caches the services rebuild).
//  6. Create the trigger's, indexer's and long-term memory's durables on
//     every shard at the first record their legacy durable had not
//     acknowledged.
//  7. Give the shard streams their final subjects and seal the legacy
//     stream (StreamConfig.Sealed), which provision then accepts; deleting
//     it is left to the operator.
//
// What is not guaranteed: records are stored anew, so their stream
// timestamps are the migration's (the original one is in
// HeaderMigratedTime) and they age out RECALL_TRANSCRIPT_MAX_AGE after the
// migration; records above an explicit-ack durable's ack floor that were
// acknowledged out of order are delivered again; KV history (older
// revisions) and lifecycle notifications on RECALL_EVENTS keep legacy
// sequences.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

// Headers the migration adds.
const (
	// HeaderMigratedFrom is on every copied record (its legacy sequence)
	// and every re-queued request (the original's sequence).
	HeaderMigratedFrom = "Recall-Migrated-From"
	// HeaderMigratedFloor is on every copied record: every legacy record
	// up to this sequence was stored in its shard when it was published.
	HeaderMigratedFloor = "Recall-Migrated-Floor"
	// HeaderMigratedTime is the legacy record's stream timestamp.
	HeaderMigratedTime = "Recall-Migrated-Time"
	// HeaderOriginalMsgID keeps a legacy record's Nats-Msg-Id when it is too
	// old to be deduplicated against (see copyHeaders).
	HeaderOriginalMsgID = "Recall-Original-Msg-Id"
	// HeaderTranslated marks a KV value whose positions were translated;
	// on a renamed key its value is the old key.
	HeaderTranslated = "Recall-Migrated"
)

var (
	// ErrServicesRunning is returned when consumers or heartbeats show that
	// Recall's services (or other readers) still run.
	ErrServicesRunning = errors.New("recall's services seem to be running")
	// ErrShardCount is returned when the target shard count differs from
	// the shards that exist or from a migration under way.
	ErrShardCount = errors.New("shard count differs")
	// errChanged is returned when a record changed while it was being
	// translated (something else writes during the migration); it wraps
	// store.ErrConflict, the one sentinel of a lost compare-and-set.
	errChanged = fmt.Errorf("changed during the migration: %w", store.ErrConflict)
)

// Config is one migration.
type Config struct {
	// Provision sizes the shard streams; Provision.Shards is S.
	Provision provision.Config
	// Force skips the check that the services are stopped.
	Force bool
	// IdleWait is how long the check waits for consumers and heartbeats to
	// go idle before refusing (0: 15 s; a stopped service's pins and
	// heartbeats expire within that).
	IdleWait time.Duration
	// MaxInFlight bounds unacknowledged publishes (0: 2048).
	MaxInFlight int
	// Progress, when set, is called as the work advances (from Run's
	// goroutine).
	Progress func(Progress)
	// Log receives what the migration does (nil: discarded).
	Log *slog.Logger

	// hook, in tests, is called at points where a kill is simulated: a
	// non-nil error stops Run at once, abandoning in-flight publishes.
	hook func(point string, n int64) error
}

// Progress is how far a step got.
type Progress struct {
	Step        string
	Done, Total int64
}

// Outcome says what Run did.
type Outcome string

// Outcomes.
const (
	OutcomeMigrated Outcome = "migrated"
	OutcomeAlready  Outcome = "already migrated"
	OutcomeNoLegacy Outcome = "no legacy stream"
)

const (
	stateFrozen     = "frozen" // the legacy stream's metadata while migrating
	stateDone       = "done"   // and once sealed
	defaultInFlight = 2048
	defaultIdleWait = 15 * time.Second
)

// Report is what a migration did.
type Report struct {
	Outcome Outcome
	Shards  int
	// LegacyRecords is the legacy stream's record count.
	LegacyRecords uint64
	// Copied counts the records this run stored in the shards; Present
	// those an earlier, interrupted run had stored; Skipped those whose
	// subject is not a session's (left in the legacy stream).
	Copied, Present, Skipped int64
	// Foreign counts records in the shards that did not come from the
	// migration (a writer of the new version during the migration).
	Foreign int64
	// PerShard is each shard's record count at the end.
	PerShard []uint64
	// Translated counts translated records per bucket or stream; Dropped
	// those removed because the records they referred to are gone; Purged
	// the cache entries deleted per bucket.
	Translated, Dropped map[string]int
	Purged              map[string]uint64
	// Durables are the consumers created on the shards.
	Durables []DurableStart
	// CompletedAt is when the migration finished (OutcomeAlready: the
	// first time).
	CompletedAt time.Time
	Duration    time.Duration
}

// DurableStart is a durable created on a shard and where it starts.
type DurableStart struct {
	Durable string
	Shard   int
	// LegacyFloor is the legacy durable's ack floor; StartSeq the shard
	// sequence the new durable starts at.
	LegacyFloor, StartSeq uint64
	Existed               bool
}

// Migrator runs a migration. Create it with New.
type Migrator struct {
	js, bulk jetstream.JetStream
	cfg      Config
	layout   events.Layout
	log      *slog.Logger
	rep      Report
	legacy   *jetstream.StreamInfo // read by inspect, updated by freeze

	inPrefix  []string          // per shard: the subject prefix copies are published on
	dedupFrom time.Time         // copies of records stored before keep no Nats-Msg-Id
	ids       map[string]uint64 // Nats-Msg-Ids kept, and their legacy records
	seenMax   uint64            // newest legacy sequence read in this run
	streams   map[string]jetstream.Stream
}

// New returns a migrator that publishes and writes on nc and reads the
// legacy and shard streams in bulk on bulk (its own connection, so bulk
// reads never share a lane with the writes; it may be nc in tests). The
// caller owns both connections.
func New(nc, bulk *nats.Conn, cfg Config) (*Migrator, error) {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultInFlight
	}
	if cfg.IdleWait <= 0 {
		cfg.IdleWait = defaultIdleWait
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cfg.MaxInFlight+64))
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	bjs, err := jetstream.New(bulk)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return &Migrator{js: js, bulk: bjs, cfg: cfg, layout: cfg.Provision.Layout(), log: cfg.Log}, nil
}

// Run migrates, or resumes an interrupted migration, and reports what it
// did. Without a legacy stream it does nothing (OutcomeNoLegacy); after a
// completed migration it does nothing either (OutcomeAlready). An error
// leaves a state a later Run resumes from; the services keep refusing to
// start (provision.ErrNeedsMigration) until a Run completes. Cancelling ctx
// stops it the same way.
func (m *Migrator) Run(ctx context.Context) (Report, error) {
	start := time.Now()
	m.rep = Report{Shards: m.layout.Shards(), Translated: map[string]int{}, Dropped: map[string]int{}, Purged: map[string]uint64{}}
	done, err := m.inspect(ctx)
	if err != nil || done {
		return m.rep, err
	}
	for _, step := range []func(context.Context) error{m.checkIdle, m.freeze, m.createShards, m.copyAll, m.translate, m.finish} {
		if err := step(ctx); err != nil {
			return m.rep, err
		}
	}
	m.rep.Outcome, m.rep.Duration = OutcomeMigrated, time.Since(start)
	return m.rep, nil
}

// at calls the test hook.
func (m *Migrator) at(point string, n int64) error {
	if m.cfg.hook == nil {
		return nil
	}
	return m.cfg.hook(point, n)
}

func (m *Migrator) progress(step string, done, total int64) {
	if m.cfg.Progress != nil {
		m.cfg.Progress(Progress{Step: step, Done: done, Total: total})
	}
}
