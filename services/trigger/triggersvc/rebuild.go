package triggersvc

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// rebuildWorkers bounds the sessions rebuilt at once by prefetch.
const rebuildWorkers = 32

// maxBatch is the most deliveries the lane takes before processing them,
// so that the sessions they need are rebuilt in parallel.
const maxBatch = 512

// rebuild replays the session's stored records before seq into s, without
// emitting: their decisions were published before they were acknowledged.
// It retries until it succeeds or ctx is done (never deciding from partial
// state).
func (l *lane) rebuild(ctx context.Context, s *session, seq uint64) error {
	th := l.settings(s.tenant()).th
	return rebuildWith(ctx, l, s, seq, &th)
}

// rebuildWith is rebuild with the thresholds resolved: it touches no lane
// state but the counters, so prefetch runs it on many goroutines.
func rebuildWith(ctx context.Context, l *lane, s *session, seq uint64, th *memory.Thresholds) error {
	l.deps.stats.rebuilds.Add(1)
	l.deps.m.rebuilds.Add(ctx, 1)
	return effects.Do(ctx, l.log, "rebuilding session "+s.key, func(ctx context.Context) error {
		st, err := replay(ctx, l.deps, s.tenant(), s.session(), seq, th)
		s.st = st
		return err
	})
}

// replay computes a session's state from its stored records before seq,
// starting from its snapshot when there is one before seq (snapshot.go).
// A replay of Config.SnapshotEvery records or more stores one at its end.
func replay(ctx context.Context, d *laneDeps, tenant, session string, seq uint64, th *memory.Thresholds) (memory.TriggerState, error) {
	layout := d.layout
	key, stream, subject := events.MemoryKey(tenant, session), layout.Stream(tenant, session), layout.Subject(tenant, session)
	var st memory.TriggerState
	from := uint64(1)
	if snap, ok := d.snaps.load(ctx, key, stream, subject, seq); ok {
		st, from = snap.st, snap.seq+1
		d.stats.fromSnapshot.Add(1)
	}
	var discard []memory.TriggerDecision
	var n int
	var lastSeq uint64
	var lastTS int64
	err := directRange(ctx, d.nc, stream, subject, from, seq-1, func(rseq uint64, ts int64, _ string, h nats.Header, data []byte) bool {
		rec, _ := decodeOrSkip(rseq, ts, h, data)
		discard = st.Observe(rec, th, discard[:0])
		n, lastSeq, lastTS = n+1, rseq, ts
		return true
	})
	if err == nil && d.cfg.SnapshotEvery > 0 && n >= d.cfg.SnapshotEvery {
		d.snaps.save(ctx, key, lastSeq, lastTS, &st)
	}
	return st, err
}

// prefetch rebuilds, in parallel, the sessions that batch's new records
// will need (not in memory, with possible history), each from the records
// before its first record in the batch, and adds them to the cache; the
// records are then processed in order and find them there. It returns an
// error only when ctx ended.
func (l *lane) prefetch(ctx context.Context, batch []jetstream.Msg) error {
	type job struct {
		s   *session
		seq uint64
		th  memory.Thresholds
	}
	var jobs []job
	seen := map[string]bool{}
	now := time.Now().UnixNano()
	next := l.next
	for _, m := range batch {
		md, err := m.Metadata()
		if err != nil || md.Sequence.Stream < next {
			continue
		}
		next = md.Sequence.Stream + 1
		key, dot, ok := sessionKey(m.Subject())
		if !ok || seen[key] || !l.mine(key, dot) || l.cache.sessions[key] != nil || !l.cache.needsRebuild(key, md.Sequence.Stream) {
			continue
		}
		seen[key] = true
		s := newSession(key, dot, now)
		jobs = append(jobs, job{s, md.Sequence.Stream, l.settings(s.tenant()).th})
	}
	if len(jobs) < 2 {
		return nil // one rebuild is as fast inline
	}
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, rebuildWorkers)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = rebuildWith(ctx, l, jobs[i].s, jobs[i].seq, &jobs[i].th)
		}()
	}
	wg.Wait()
	for i, j := range jobs {
		if errs[i] != nil {
			return errs[i]
		}
		l.adopt(j.s)
	}
	return nil
}

// adopt adds a rebuilt session to the cache; a pending response (its last
// record acknowledged in an earlier life) gets a hold that only arms the
// quiet-period timer.
func (l *lane) adopt(s *session) {
	if pseq, pts, ok := s.st.Pending(); ok {
		th := l.settings(s.tenant()).th
		l.led.hold(hold{s: s, seq: pseq, deadline: pts + int64(th.QuietPeriod)})
	}
	l.cache.add(s)
}

// mine reports whether the session of key belongs to this lane: a lane
// follows one shard stream, which holds only its own sessions, so a
// session of another shard is a misrouted record (never processed).
func (l *lane) mine(key string, dot int) bool {
	return l.deps.layout.Shard(key[:dot], key[dot+1:]) == l.shard
}
