// Package erase removes every trace of a session or a user from Recall's
// streams and buckets, history included, and keeps an erased session from
// coming back while its tombstone lives.
//
// Erasing a session (Eraser.Session):
//  1. writes a tombstone (events.BucketTombstones, per-key TTL): ingest
//     refuses the session's events from then on (410 Gone), and Guard
//     removes whatever a service still writes for it;
//  2. waits Config.Drain, so events accepted just before the tombstone are
//     stored (and purged with the rest);
//  3. purges, subject by subject, the transcript (the session's subject in
//     its shard stream), notifications, queued
//     extraction requests, memory, status, trigger snapshot, parked
//     requests, index entry and lease, commit records and parked commits
//     (a stream purge with a subject filter removes every revision of a KV
//     key: no history and no delete marker remain), the session's name
//     claim (only while it names the session) and its claim-checked bodies
//     in events.BucketBlobs (objects and their metadata);
//  4. announces the erase (events.TypeSessionErased: ids and counts, never
//     content) and returns a receipt of the same counts.
//
// Erasing is idempotent: a second erase finds nothing and returns a
// receipt with no parts. What is not guaranteed: a service that holds a
// session's content in memory (the trigger's session state, the
// compactor's caches) keeps it until it evicts it — it can no longer write
// it back while the tombstone lives (Guard) — and bytes of purged messages
// may stay in the server's file blocks until the blocks are compacted;
// backups keep what they hold (docs/operations.md, "Data lifecycle").
package erase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// ErrInvalid marks a tenant, session or user id that is not valid.
var ErrInvalid = errors.New("invalid id")

// Config configures an Eraser (environment variables RECALL_ERASE_*). Zero
// values take the defaults of their tags (internal/envconf).
type Config struct {
	TombstoneTTL time.Duration `envconfig:"TOMBSTONE_TTL" default:"24h" desc:"how long an erased session's events are refused (410 Gone) and anything written for it again is removed"`
	Drain        time.Duration `envconfig:"DRAIN" default:"500ms" negative:"ok" desc:"how long an erase waits after its tombstone before purging, so events accepted just before are purged too (negative: no wait)"`
}

// LogValue logs the settings under their variables' names.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// withDefaults fills unset values from their tags (internal/envconf); a
// negative drain is no wait.
func (c Config) withDefaults() Config {
	envconf.Defaults(&c)
	c.Drain = max(c.Drain, 0)
	return c
}

// Actor says who asked for an erase (it is announced, never who the user
// is).
type Actor struct {
	Operator bool
	// Reason is announced with the erase ("retention" for the sweeper).
	Reason string
}

// Eraser erases sessions and users. It is safe for concurrent use.
type Eraser struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	layout events.Layout // where the transcript is: the session's shard stream
	cfg    Config
	pub    *eventpub.Publisher
	tombs  *Tombstones
	log    *slog.Logger
}

// New returns an Eraser over js (its connection also serves the Direct
// Get reads) of the transcript stored in layout's shards. tombs, when not
// nil, learns each tombstone at once (the set ingest checks); log may be
// nil.
func New(js jetstream.JetStream, layout events.Layout, cfg Config, tombs *Tombstones, log *slog.Logger) *Eraser {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if tombs == nil {
		tombs = NewTombstones()
	}
	return &Eraser{js: js, nc: js.Conn(), layout: layout, cfg: cfg.withDefaults(), pub: eventpub.New(js, "eraser"), tombs: tombs, log: log}
}

// JetStream is the handle the eraser works through.
func (e *Eraser) JetStream() jetstream.JetStream { return e.js }

// Tombstones is the set the eraser adds to.
func (e *Eraser) Tombstones() *Tombstones { return e.tombs }

// Session erases a session everywhere and announces it; see the package
// comment. An error leaves the tombstone in place and part of the session
// erased: erasing again completes it.
func (e *Eraser) Session(ctx context.Context, tenant, session string, by Actor) (events.EraseReceipt, error) {
	r := events.EraseReceipt{Tenant: tenant, Session: session, Parts: []events.ErasedPart{}, ErasedAt: time.Now().UTC()}
	if err := validate(tenant, session); err != nil {
		return r, err
	}
	until, err := e.tombstone(ctx, tenant, session)
	if err != nil {
		return r, err
	}
	r.TombstoneUntil = until
	if err := e.drain(ctx); err != nil {
		return r, err
	}
	err = e.finish(ctx, &r, by)
	return r, err
}

// finish erases the traces of r's session (its tombstone written and the
// drain over), announces the erase and logs it.
func (e *Eraser) finish(ctx context.Context, r *events.EraseReceipt, by Actor) error {
	tenant, session := r.Tenant, r.Session
	if err := e.traces(ctx, tenant, session, r); err != nil {
		return err
	}
	data := events.Erased{Session: session, Parts: r.Parts, Total: r.Total, Operator: by.Operator, Reason: by.Reason}
	if err := e.pub.Publish(ctx, events.EventsSubject(events.KindSessionErased, tenant, session),
		eventpub.Event{Type: events.TypeSessionErased, Tenant: tenant, Session: session, Data: data}); err != nil {
		return fmt.Errorf("announcing the erase: %w", err)
	}
	e.log.InfoContext(ctx, "session erased", "tenant", tenant, "session", session, "removed", r.Total, "operator", by.Operator)
	return nil
}

// tombstone writes the session's tombstone and adds it to the local set.
func (e *Eraser) tombstone(ctx context.Context, tenant, session string) (time.Time, error) {
	now := time.Now().UTC()
	t := events.Tombstone{Tenant: tenant, Session: session, ErasedAt: now, Until: now.Add(e.cfg.TombstoneTTL)}
	b, _ := json.Marshal(t)
	if _, err := store.PutTTL(ctx, e.js, events.BucketTombstones, events.TombstoneKey(tenant, session), b, e.cfg.TombstoneTTL, 0); err != nil {
		return time.Time{}, fmt.Errorf("writing the tombstone: %w", err)
	}
	e.tombs.add(tenant, session, t.Until, now.Add(e.cfg.Drain))
	return t.Until, nil
}

// part is one subject filter of one stream to purge.
type part struct {
	stream, filter string
	store, what    string
}

// sessionParts are the subjects that hold nothing but the session: its
// transcript is its subject in its shard stream.
func sessionParts(layout events.Layout, tenant, session string) []part {
	key := events.MemoryKey(tenant, session)
	kv := func(bucket, what, key string) part {
		return part{stream: "KV_" + bucket, filter: "$KV." + bucket + "." + key, store: bucket, what: what}
	}
	shard := layout.Stream(tenant, session)
	return []part{
		{shard, layout.Subject(tenant, session), shard, "transcript"},
		{events.StreamExtract, events.SubjectExtractPartitioned + ".*." + tenant + "." + session, events.StreamExtract, "extraction requests"},
		kv(events.BucketMemory, "memory", key),
		kv(events.BucketStatus, "extraction status", key),
		kv(events.BucketTriggerState, "trigger snapshot", key),
		kv(events.BucketParked, "parked requests", key+".*"),
		kv(events.BucketIndex, "index entry", key),
		kv(events.BucketIndex, "indexing lease", "leases."+key),
		kv(events.BucketLTMState, "commit record", events.CommitKey(tenant, session)),
		kv(events.BucketLTMState, "parked commits", events.ParkedCommitPrefix+"."+key+".*"),
	}
}

// traces removes everything of the session (steps 3 of the package
// comment), recording what in r.
func (e *Eraser) traces(ctx context.Context, tenant, session string, r *events.EraseReceipt) error {
	// The name claim and the owner are found through the index entry:
	// read it first.
	idx, _, err := e.entry(ctx, tenant, session)
	if err != nil {
		return err
	}
	if err := e.nameClaim(ctx, tenant, session, idx.Name, r); err != nil {
		return err
	}
	user, err := e.owner(ctx, tenant, session, idx)
	if err != nil {
		return err
	}
	if err := e.contributions(ctx, tenant, session, user, r); err != nil {
		return err
	}
	if err := e.blobs(ctx, tenant, session, r); err != nil {
		return err
	}
	if err := e.notifications(ctx, tenant, session, r); err != nil {
		return err
	}
	for _, p := range sessionParts(e.layout, tenant, session) {
		n, err := e.purge(ctx, p.stream, p.filter)
		if err != nil {
			return fmt.Errorf("erasing the %s: %w", p.what, err)
		}
		r.Add(p.store, p.what, n)
	}
	return nil
}

func validate(ids ...string) error {
	for _, id := range ids {
		if err := events.ValidateID(id); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}

// drain waits cfg.Drain after the tombstones are written, so that events
// accepted just before them are purged too; ctx.Err() when ctx ends
// first.
func (e *Eraser) drain(ctx context.Context) error {
	if e.cfg.Drain > 0 && !retry.Pause(ctx.Done(), e.cfg.Drain) {
		return ctx.Err()
	}
	return nil
}
