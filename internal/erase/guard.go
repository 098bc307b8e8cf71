package erase

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// Tombstones is the set of erased sessions whose tombstone lives, as one
// process knows it (Guard keeps it from events.BucketTombstones). It is
// safe for concurrent use.
type Tombstones struct {
	mu    sync.RWMutex
	m     map[string]tomb // by events.TombstoneKey
	added chan struct{}   // signalled (without blocking) by add
}

// tomb is one live tombstone: until it expires; from when the guard acts
// (the end of its erase's drain: what lands before is purged by the erase
// itself and counted in its receipt).
type tomb struct{ until, guardFrom time.Time }

// NewTombstones returns an empty set.
func NewTombstones() *Tombstones {
	return &Tombstones{m: map[string]tomb{}, added: make(chan struct{}, 1)}
}

// Erased reports whether the session is erased and its tombstone lives,
// and until when.
func (t *Tombstones) Erased(tenant, session string) (until time.Time, ok bool) {
	t.mu.RLock()
	tb, ok := t.m[events.TombstoneKey(tenant, session)]
	t.mu.RUnlock()
	return tb.until, ok && time.Now().Before(tb.until)
}

// guarding reports whether the guard should erase the session's late
// writes now: its tombstone lives and its erase's drain is over.
func (t *Tombstones) guarding(tenant, session string) bool {
	t.mu.RLock()
	tb, ok := t.m[events.TombstoneKey(tenant, session)]
	t.mu.RUnlock()
	now := time.Now()
	return ok && now.Before(tb.until) && !now.Before(tb.guardFrom)
}

func (t *Tombstones) add(tenant, session string, until, guardFrom time.Time) {
	t.mu.Lock()
	t.m[events.TombstoneKey(tenant, session)] = tomb{until: until, guardFrom: guardFrom}
	t.mu.Unlock()
	select {
	case t.added <- struct{}{}:
	default:
	}
}

func (t *Tombstones) remove(key string) {
	t.mu.Lock()
	delete(t.m, key)
	t.mu.Unlock()
}

// guarded are the buckets where a service may still write for a session
// after its erase (an extraction, indexing or commit that was running).
var guarded = []string{events.BucketMemory, events.BucketStatus, events.BucketTriggerState, events.BucketIndex,
	events.BucketParked, events.BucketLTMState}

// Guard keeps erased sessions erased while their tombstones live: it
// loads the tombstones into the eraser's set (and returns once they are
// loaded), then follows them, and watches the guarded buckets' writes
// (metadata only), the transcript and the notifications (headers only);
// anything written for a tombstoned session — a record a trusted producer
// published directly, a memory commit of an extraction that was running
// during the erase, its status, an index entry, a notification — makes
// the guard erase the session's traces again (without a new
// announcement). Guard returns once the tombstones are loaded; the
// watching runs only while a tombstone lives (see guard.run) and ends with
// ctx.
func (e *Eraser) Guard(ctx context.Context) error {
	tk, err := e.js.KeyValue(ctx, events.BucketTombstones)
	if err != nil {
		return fmt.Errorf("opening %s: %w", events.BucketTombstones, err)
	}
	tw, err := tk.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watching %s: %w", events.BucketTombstones, err)
	}
	if err := e.loadTombstones(ctx, tw); err != nil {
		_ = tw.Stop() // a failed start leaves no watch behind (it may be retried)
		return err
	}
	go e.followTombstones(ctx, tw)
	g := &guard{e: e, pending: map[string]bool{}}
	go g.run(ctx)
	return nil
}

// start watches the guarded buckets' writes and follows the transcript
// and the notifications, until ctx is done.
func (g *guard) start(ctx context.Context) error {
	for _, b := range guarded {
		kv, err := g.e.js.KeyValue(ctx, b)
		if err != nil {
			return fmt.Errorf("opening %s: %w", b, err)
		}
		w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.MetaOnly(), jetstream.IgnoreDeletes())
		if err != nil {
			return fmt.Errorf("watching %s: %w", b, err)
		}
		go g.watch(ctx, w)
	}
	return g.follow(ctx)
}

// loadTombstones reads the watch's initial values.
func (e *Eraser) loadTombstones(ctx context.Context, w jetstream.KeyWatcher) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case v := <-w.Updates():
			if v == nil {
				return nil
			}
			e.tombstoneSeen(v)
		}
	}
}

func (e *Eraser) followTombstones(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case v, ok := <-w.Updates():
			if !ok {
				return
			}
			if v != nil {
				e.tombstoneSeen(v)
			}
		}
	}
}

func (e *Eraser) tombstoneSeen(v jetstream.KeyValueEntry) {
	if v.Operation() != jetstream.KeyValuePut {
		e.tombs.remove(v.Key())
		return
	}
	var t events.Tombstone
	if json.Unmarshal(v.Value(), &t) == nil && validate(t.Tenant, t.Session) == nil {
		e.tombs.add(t.Tenant, t.Session, t.Until, t.ErasedAt.Add(e.cfg.Drain))
	}
}

// guard erases again the sessions written for after their erase, one
// pass per session at a time.
type guard struct {
	e       *Eraser
	mu      sync.Mutex
	pending map[string]bool
}

func (g *guard) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case v, ok := <-w.Updates():
			if !ok {
				return
			}
			if v == nil {
				continue
			}
			if tenant, session, ok := keySession(v.Key()); ok {
				g.check(ctx, tenant, session)
			}
		}
	}
}

// keySession is the session a guarded key belongs to: <t>.<s>,
// <t>.<s>.<n> (parked), leases.<t>.<s>, commits.<t>.<s> and
// parked.<t>.<s>.<n>; name claims and other keys belong to none.
func keySession(key string) (tenant, session string, ok bool) {
	tok := strings.Split(key, ".")
	switch tok[0] {
	case "leases", "commits", events.ParkedCommitPrefix:
		tok = tok[1:]
	case "names", "invalid":
		return "", "", false
	}
	if len(tok) < 2 || validate(tok[0], tok[1]) != nil {
		return "", "", false
	}
	return tok[0], tok[1], true
}

// check erases the session's traces again if it is tombstoned and its
// erase's drain is over. A write during the drain is left to the erase,
// which purges after the drain: were the guard to remove it first, the
// erase's receipt would not count what it erased (each replica's guard
// acts from the tombstone's erased_at plus its own drain setting).
func (g *guard) check(ctx context.Context, tenant, session string) {
	if !g.e.tombs.guarding(tenant, session) {
		return
	}
	key := events.MemoryKey(tenant, session)
	g.mu.Lock()
	busy := g.pending[key]
	g.pending[key] = true
	g.mu.Unlock()
	if busy {
		return
	}
	go func() {
		// A short pause gathers the writes of one late effect (a commit,
		// then its status and notification) into one pass.
		retry.Pause(ctx.Done(), 100*time.Millisecond)
		g.mu.Lock()
		delete(g.pending, key)
		g.mu.Unlock()
		var r events.EraseReceipt
		if err := g.e.traces(ctx, tenant, session, &r); err != nil {
			g.e.log.WarnContext(ctx, "erasing late writes of an erased session", "tenant", tenant, "session", session, "err", err)
			return
		}
		g.e.log.InfoContext(ctx, "late writes of an erased session removed", "tenant", tenant, "session", session, "removed", r.Total)
	}()
}
