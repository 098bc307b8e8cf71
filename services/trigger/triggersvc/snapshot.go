package triggersvc

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/nats-io/nats.go"

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

// openSnapshots opens the bucket once per Run; without it (a server
// provisioned by an older version) sessions are replayed whole.
func (t *Trigger) openSnapshots(ctx context.Context) {
	if t.cfg.SnapshotEvery < 0 {
		return
	}
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	kv, err := t.js.KeyValue(actx, events.BucketTriggerState)
	if err != nil {
		t.log.Warn("no trigger state snapshots: long sessions are replayed whole when rebuilt", "bucket", events.BucketTriggerState, "err", err)
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
	t.snapMu.Lock()
	t.snapKeys = keys
	t.snapMu.Unlock()
	t.snaps.Store(&kv)
}

// hasSnapshot reports whether a snapshot of key was listed or stored.
func (t *Trigger) hasSnapshot(key string) bool {
	t.snapMu.Lock()
	defer t.snapMu.Unlock()
	_, ok := t.snapKeys[key]
	return ok
}

// saveSnapshot stores st as the state after record seq (stream time ts) of
// the session key. Best effort: a failure only means a longer replay.
func (t *Trigger) saveSnapshot(ctx context.Context, key string, seq uint64, ts int64, st *memory.TriggerState) {
	kv := t.snaps.Load()
	if kv == nil {
		return
	}
	snap := snapshot{seq: seq, ts: ts, st: *st}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	defer cancel()
	if _, err := (*kv).Put(actx, key, snap.encode()); err != nil {
		t.log.Debug("storing a trigger state snapshot", "session", key, "seq", seq, "err", err)
		return
	}
	t.stats.snapshots.Add(1)
	t.snapMu.Lock()
	t.snapKeys[key] = struct{}{}
	t.snapMu.Unlock()
}

// loadSnapshot returns the session's stored state when it follows a record
// before seq that the transcript still holds, under subject, with the same
// time.
func (t *Trigger) loadSnapshot(ctx context.Context, key, subject string, seq uint64) (snapshot, bool) {
	kv := t.snaps.Load()
	if kv == nil || !t.hasSnapshot(key) {
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
	err = directRange(actx, t.nc, events.StreamTranscript, subject, snap.seq, snap.seq, func(rseq uint64, ts int64, _ string, _ nats.Header, _ []byte) bool {
		found = rseq == snap.seq && ts == snap.ts
		return false
	})
	if err != nil || !found {
		return snapshot{}, false
	}
	return snap, true
}
