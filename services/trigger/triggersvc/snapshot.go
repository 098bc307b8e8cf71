package triggersvc

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Snapshots of long sessions' state (RECALL_TRIGGER_STATE, one key per
// session: events.MemoryKey). A session's state is a pure function of its
// records, so the state after record S is valid for as long as the
// transcript holds S; a rebuild before record R (R > S) starts from the
// snapshot and replays only S+1..R-1. A snapshot at R itself is never used
// for R: R may be a redelivery whose decisions must be made again. A lane
// stores one every Config.SnapshotEvery records of a session, and a replay
// that read that many stores one at its end. Missing, unreadable or stale
// snapshots (the record at S is gone or is not the session's, a recreated
// stream) mean a replay from the first record, as without snapshots.

// snapshot is a stored state and the record it follows.
type snapshot struct {
	seq uint64
	ts  int64
	st  memory.TriggerState
}

func (s *snapshot) encode() []byte {
	st, _ := s.st.MarshalBinary()
	b := binary.AppendUvarint(make([]byte, 0, 20+len(st)), s.seq)
	b = binary.AppendVarint(b, s.ts)
	return append(b, st...)
}

var errSnapshot = errors.New("not a trigger snapshot")

func (s *snapshot) decode(b []byte) error {
	seq, n := binary.Uvarint(b)
	if n <= 0 {
		return errSnapshot
	}
	ts, m := binary.Varint(b[n:])
	if m <= 0 {
		return errSnapshot
	}
	s.seq, s.ts = seq, ts
	return s.st.UnmarshalBinary(b[n+m:])
}

// snapshotStore is RECALL_TRIGGER_STATE: the snapshots of long sessions'
// state. Create it with newSnapshotStore and open it once per Run; until it
// is open (or when it cannot be) it stores nothing and finds nothing, so
// sessions are replayed whole. It is safe for concurrent use (every lane
// and the rebuilds of prefetch share it); save and load are best effort and
// never return an error.
type snapshotStore struct {
	js    jetstream.JetStream
	nc    *nats.Conn // Direct Gets that check a snapshot's record
	log   *slog.Logger
	every int           // Config.SnapshotEvery: < 0 means no snapshots
	saved *atomic.Int64 // counts the snapshots stored (Stats.Snapshots)

	kv   atomic.Pointer[jetstream.KeyValue] // set by open
	mu   sync.Mutex                         // guards keys
	keys map[string]struct{}                // sessions with a snapshot
}

func newSnapshotStore(js jetstream.JetStream, nc *nats.Conn, log *slog.Logger, every int, saved *atomic.Int64) *snapshotStore {
	return &snapshotStore{js: js, nc: nc, log: log, every: every, saved: saved}
}

// open opens the bucket once per Run; without it (a server provisioned by
// an older version) sessions are replayed whole.
func (s *snapshotStore) open(ctx context.Context) {
	if s.every < 0 {
		return
	}
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	kv, err := s.js.KeyValue(actx, events.BucketTriggerState)
	if err != nil {
		s.log.Warn("no trigger state snapshots: long sessions are replayed whole when rebuilt", "bucket", events.BucketTriggerState, "err", err)
		return
	}
	// Rebuilds look a snapshot up only for the sessions that have one, not
	// for each of 100,000 short sessions after a restart.
	keys := map[string]struct{}{}
	lctx, lcancel := context.WithTimeout(ctx, attemptTimeout)
	defer lcancel()
	if lister, err := kv.ListKeys(lctx); err == nil {
		for k := range lister.Keys() {
			keys[k] = struct{}{}
		}
		_ = lister.Stop()
	}
	s.mu.Lock()
	s.keys = keys
	s.mu.Unlock()
	s.kv.Store(&kv)
}

// has reports whether a snapshot of key was listed or stored.
func (s *snapshotStore) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[key]
	return ok
}

// save stores st as the state after record seq (stream time ts) of the
// session key. Best effort: a failure only means a longer replay.
func (s *snapshotStore) save(ctx context.Context, key string, seq uint64, ts int64, st *memory.TriggerState) {
	kv := s.kv.Load()
	if kv == nil {
		return
	}
	snap := snapshot{seq: seq, ts: ts, st: *st}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	defer cancel()
	if _, err := (*kv).Put(actx, key, snap.encode()); err != nil {
		s.log.Debug("storing a trigger state snapshot", "session", key, "seq", seq, "err", err)
		return
	}
	s.saved.Add(1)
	s.mu.Lock()
	s.keys[key] = struct{}{}
	s.mu.Unlock()
}

// load returns the session's stored state when it follows a record before
// seq that the transcript still holds, under subject, with the same time.
func (s *snapshotStore) load(ctx context.Context, key, stream, subject string, seq uint64) (snapshot, bool) {
	kv := s.kv.Load()
	if kv == nil || !s.has(key) {
		return snapshot{}, false
	}
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	e, err := (*kv).Get(actx, key)
	if err != nil {
		return snapshot{}, false
	}
	var snap snapshot
	if snap.decode(e.Value()) != nil || snap.seq == 0 || snap.seq >= seq {
		return snapshot{}, false
	}
	found := false
	err = directRange(actx, s.nc, stream, subject, snap.seq, snap.seq, func(rseq uint64, ts int64, _ string, _ nats.Header, _ []byte) bool {
		found = rseq == snap.seq && ts == snap.ts
		return false
	})
	if err != nil || !found {
		return snapshot{}, false
	}
	return snap, true
}
