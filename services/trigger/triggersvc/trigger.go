package triggersvc

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"

	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

var instances atomic.Int64

// Component names the trigger in the events it produces (source
// "/recall/trigger").
const Component = "trigger"

// PriorityGroup is the pinned priority group of the trigger's durable
// consumers: one replica at a time receives a consumer's records.
const PriorityGroup = "recall"

// skewMargin is added to the quiet period before the local clock alone (an
// idle stream) completes a response, to absorb clock skew between this host
// and the NATS server that timestamps records.
const skewMargin = time.Second

// Trigger follows the transcript's shards and publishes extraction
// requests.
// Create it with New, run it with Run. Its exported methods are safe for
// concurrent use.
type Trigger struct {
	laneDeps // what its lanes use (lane.go)
	log      *slog.Logger

	mu    sync.Mutex // guards lanes
	lanes map[*lane]struct{}
	group atomic.Pointer[pcgroup.Group]
}

// Ready reports whether the trigger consumes: a lane is running, or the
// replica joined its group, which gives it no shard when there are more
// replicas than shards.
func (t *Trigger) Ready() bool {
	if t.consuming.Load() {
		return true
	}
	g := t.group.Load()
	return g != nil && len(g.Members()) > 0
}

// counters are the trigger's statistics, shared by its lanes.
type counters struct {
	records, delivered, decisions, gated, rebuilds, redelivered, gapFilled, evictions, takeovers atomic.Int64
	sessions, bytes, warmed, snapshots, fromSnapshot                                             atomic.Int64
}

// Stats is a snapshot of the trigger's counters.
type Stats struct {
	Records     int64 // transcript records processed
	Delivered   int64 // messages the consumer delivered to this replica
	Decisions   int64 // extraction requests published (threshold)
	Gated       int64 // decisions not published because session_memory is off
	Rebuilds    int64 // sessions rebuilt from the transcript
	Redelivered int64 // deliveries of records already processed
	GapFilled   int64 // records read by Direct Get (not delivered to this replica)
	Evictions   int64 // sessions evicted from memory
	Takeovers   int64 // times this replica adopted another replica's progress
	Sessions    int64 // sessions in memory
	// BytesPerSession estimates the memory of one session in the cache.
	BytesPerSession int64
	Lag             int64 // records not yet delivered (consumer num_pending, summed over lanes)
	Lanes           int   // consumers (partitions) this replica follows now
	Warmed          int64 // sessions rebuilt by warm starts (one read of the transcript)
	Snapshots       int64 // session state snapshots stored
	FromSnapshot    int64 // rebuilds that replayed only the records after a snapshot
}

// New returns a trigger that uses nc. tenants (may be nil) supplies
// per-tenant thresholds and gates.
func New(nc *nats.Conn, cfg Config, tenants *tenantcfg.Store, log *slog.Logger) (*Trigger, error) {
	cfg = cfg.WithDefaults()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(attemptTimeout))
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Trigger{log: log, lanes: map[*lane]struct{}{}}
	t.laneDeps = laneDeps{
		id: instances.Add(1), cfg: cfg, layout: cfg.Layout(), base: cfg.Thresholds(), nc: nc, js: js,
		reader: transcript.NewReader(nc, cfg.Layout()).Stubs(), tenants: tenants, tracer: otel.Tracer("recall/trigger"),
		m: newMetrics(),
	}
	t.snaps = newSnapshotStore(js, nc, log, cfg.SnapshotEvery, &t.stats.snapshots)
	return t, nil
}

// ConsumerConfig is the trigger's durable consumer on every shard stream
// of the transcript: AckAll (one ack covers every record below it), a
// pinned priority group (one replica at a time reads a shard), and no
// InactiveThreshold (a durable must never be reaped).
func (c Config) ConsumerConfig() jetstream.ConsumerConfig {
	c = c.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:        events.DurableTrigger,
		Description:    "Recall trigger: extraction decisions",
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckAllPolicy,
		AckWait:        c.AckWait,
		MaxAckPending:  c.MaxAckPending,
		MaxDeliver:     -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{PriorityGroup},
		PinnedTTL:      c.PinnedTTL,
	}
}

// Run consumes the transcript until ctx is done, then stops taking
// records, waits up to 5 s for its publications, acknowledges what they
// cover, releases its consumers, and returns nil. While NATS is
// unavailable it retries (and takes no work); it never acknowledges a
// record whose decisions were not stored. The streams must exist
// (provision.Ensure).
func (t *Trigger) Run(ctx context.Context) error {
	reg, err := t.m.observe(t)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	defer func() { _ = reg.Unregister() }()
	t.snaps.open(ctx)
	return t.runGroup(ctx)
}

// laneRestart is the wait before a stopped lane is started again: 100 ms,
// doubling up to 5 s.
var laneRestart = retry.Policy{First: 100 * time.Millisecond, Max: 5 * time.Second}

// runLane runs l, registered for Stats.
func (t *Trigger) runLane(ctx context.Context, l *lane) error {
	t.mu.Lock()
	t.lanes[l] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.lanes, l)
		t.mu.Unlock()
		l.cache.dropAll() // its sessions leave the gauges
	}()
	return l.run(ctx)
}

// Stats returns the current counters.
func (t *Trigger) Stats() Stats {
	s := Stats{
		Records: t.stats.records.Load(), Delivered: t.stats.delivered.Load(), Decisions: t.stats.decisions.Load(), Gated: t.stats.gated.Load(),
		Rebuilds: t.stats.rebuilds.Load(), Redelivered: t.stats.redelivered.Load(), GapFilled: t.stats.gapFilled.Load(),
		Evictions: t.stats.evictions.Load(), Takeovers: t.stats.takeovers.Load(),
		Sessions: t.stats.sessions.Load(), Warmed: t.stats.warmed.Load(),
		Snapshots: t.stats.snapshots.Load(), FromSnapshot: t.stats.fromSnapshot.Load(),
	}
	t.mu.Lock()
	for l := range t.lanes {
		s.Lag += l.lag.Load()
	}
	s.Lanes = len(t.lanes)
	t.mu.Unlock()
	if s.Sessions > 0 {
		s.BytesPerSession = t.stats.bytes.Load() / s.Sessions
	}
	return s
}

// runGroup runs the trigger's replicas as a group over the transcript's
// shards: this replica joins it in RECALL_TRIGGERS and runs a lane for
// every shard it owns; a lane follows the durable DurableTrigger of its
// shard stream, which holds only that shard's sessions, so no replica
// receives a record it would drop. One replica owns every shard.
func (t *Trigger) runGroup(ctx context.Context) error {
	n := t.layout.Shards()
	perLane := max(t.cfg.MaxSessions/n, 1)
	g, err := pcgroup.New(t.js, pcgroup.Config{
		StreamOf: events.TranscriptShardStream, Partitions: n, Durable: func(int) string { return events.DurableTrigger },
		PriorityGroup: PriorityGroup, Bucket: events.BucketTriggers, Member: t.cfg.MemberID,
		HeartbeatTTL: t.cfg.PinnedTTL, AckWait: t.cfg.AckWait, PinnedTTL: t.cfg.PinnedTTL, Log: t.log,
		// Replicas started together (a rollout, a restarted cluster) take
		// their shards once, instead of one taking all and handing them
		// over, each hand-off a rebuild of the shard's sessions.
		Settle: min(t.cfg.PinnedTTL/4, time.Second),
		Consumer: func(k int) jetstream.ConsumerConfig {
			c := t.cfg.ConsumerConfig()
			c.Description = fmt.Sprintf("Recall trigger: extraction decisions, shard %d of %d", k, n)
			return c
		},
		Consume: func(ctx context.Context, k int, cons jetstream.Consumer) error {
			l := t.newLane(cons, events.TranscriptShardStream(k), "", events.DurableTrigger, perLane)
			l.shard = k
			return t.runLane(ctx, l)
		},
	}, nil)
	if err != nil {
		return err
	}
	t.group.Store(g)
	// The attempt runs with ctx itself: it lasts as long as the replica
	// serves, and returns early only when it cannot join.
	_ = pcgroup.Rejoin.Do(ctx, t.log, "joining the trigger group", func(context.Context) error { return g.Run(ctx) })
	return nil
}
