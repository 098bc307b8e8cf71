package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// Soak traffic: soakActive sessions at once, each soakSessionLen messages
// between its start (with a user, so its end commits long-term memory) and
// its end; a finished session is replaced by a new one. The trigger's
// thresholds (benchThresholds) extract each session several times, the
// indexer indexes it, the long-term service commits it at its end, and a
// prober compacts a random active session soakCompactEvery.
const (
	soakActive       = 32
	soakSessionLen   = 160
	soakUsers        = 16
	soakCompactEvery = 500 * time.Millisecond
	soakTick         = 50 * time.Millisecond
)

// soakSession is one session's bookkeeping: which of its events the edge
// acknowledged. Its ids are "<session>-start", benchgen's
// "<session>-mNNNNNN" and "<session>-end" (event ids are unique per tenant); failed holds those not stored after the client's retries.
type soakSession struct {
	id      string
	sent    int // messages generated
	started bool
	ended   bool
	failed  []string
}

// soakLoad drives the soak's traffic through the HTTP edge with the
// client's retries (the same event ids on a resend).
type soakLoad struct {
	cl  *client.HTTP
	gen *benchgen.Gen
	rnd *rand.Rand

	mu       sync.Mutex
	sessions []*soakSession // every session, in creation order
	active   []*soakSession
	next     int
	acked    int // events acknowledged (stored or duplicate)
	dupAcks  int // events the edge answered as already stored (resends)
	failures int // events not stored after the retries

	compactMu sync.Mutex
	compact   latencies
	outcomes  map[string]int
}

func newSoakLoad(cl *client.HTTP) *soakLoad {
	l := &soakLoad{cl: cl, gen: benchgen.New(47), rnd: rand.New(rand.NewPCG(47, 4)), outcomes: map[string]int{}}
	for range soakActive {
		l.active = append(l.active, l.newSession())
	}
	return l
}

func (l *soakLoad) newSession() *soakSession {
	s := &soakSession{id: fmt.Sprintf("soak%06d", l.next)}
	l.next++
	l.sessions = append(l.sessions, s)
	return s
}

// batch returns the next n events round-robin over the active sessions,
// replacing sessions that ended.
func (l *soakLoad) batch(n int) ([]event.Event, []*soakSession) {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := make([]event.Event, 0, n)
	owners := make([]*soakSession, 0, n)
	for i := 0; len(evs) < n; i++ {
		k := i % len(l.active)
		s := l.active[k]
		var e event.Event
		switch {
		case !s.started:
			s.started = true
			e = lifecycleEvent(s.id, s.id+"-start", events.TypeSessionStarted, events.SessionStarted{
				UserID: fmt.Sprintf("user%02d", l.next%soakUsers), AgentID: "soak"})
		case s.sent >= soakSessionLen:
			s.ended = true
			e = lifecycleEvent(s.id, s.id+"-end", events.TypeSessionEnded, events.SessionEnded{Reason: "soak"})
			l.active[k] = l.newSession()
		default:
			s.sent++
			e = l.gen.Event(s.id)
		}
		evs, owners = append(evs, e), append(owners, s)
	}
	return evs, owners
}

// lifecycleEvent is a session's start or end as a platform sends it.
func lifecycleEvent(session, id, typ string, data any) event.Event {
	e := event.New()
	e.SetID(id)
	e.SetSource("recall-bench")
	e.SetType(typ)
	e.SetSubject(session)
	e.SetTime(time.Now())
	e.SetDataContentType(event.ApplicationJSON)
	e.DataEncoded, _ = json.Marshal(data)
	return e
}

// publish sends a batch and records every event's outcome.
func (l *soakLoad) publish(ctx context.Context, n int) {
	evs, owners := l.batch(n)
	res, _ := l.cl.PublishBatch(ctx, evs)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range res {
		switch {
		case r.Err != nil:
			l.failures++
			owners[i].failed = append(owners[i].failed, evs[i].ID())
		case r.Duplicate:
			l.acked++
			l.dupAcks++
		default:
			l.acked++
		}
	}
}

// pace publishes at rate events/s (batches every soakTick) until stop
// ends, each batch under ctx (a batch under way when stop ends is
// settled, not abandoned); rate 0 publishes as fast as one client can, in
// batches of 100.
func (l *soakLoad) pace(ctx, stop context.Context, rate float64) {
	start, sent := time.Now(), 0
	tick := time.NewTicker(soakTick)
	defer tick.Stop()
	for stop.Err() == nil && ctx.Err() == nil {
		if rate <= 0 {
			l.publish(ctx, 100)
			continue
		}
		select {
		case <-stop.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * rate)
		if due > sent {
			l.publish(ctx, min(due-sent, 500))
			sent = due
		}
	}
}

// counts returns the acknowledged and failed event counts.
func (l *soakLoad) counts() (acked, dupAcks, failures int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked, l.dupAcks, l.failures
}

// probeCompactions compacts a random active session with messages every
// soakCompactEvery until ctx ends, recording latencies and outcomes.
func (l *soakLoad) probeCompactions(ctx context.Context) {
	tick := time.NewTicker(soakCompactEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		s := l.active[l.rnd.IntN(len(l.active))]
		id, msgs := s.id, s.sent
		l.mu.Unlock()
		if msgs < 8 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		reply, err := l.cl.Compact(cctx, id, events.CompactRequest{})
		d := time.Since(t0)
		cancel()
		outcome := "error"
		if err == nil {
			outcome = reply.Outcome
		} else if st := client.Status(err); st != 0 {
			outcome = fmt.Sprintf("http_%d", st)
		}
		l.compactMu.Lock()
		l.outcomes[outcome]++
		if err == nil {
			l.compact = append(l.compact, d)
		}
		l.compactMu.Unlock()
	}
}

// takeCompactions returns and resets the compaction figures of a phase.
func (l *soakLoad) takeCompactions() (latencies, map[string]int) {
	l.compactMu.Lock()
	defer l.compactMu.Unlock()
	c, o := l.compact, l.outcomes
	l.compact, l.outcomes = nil, map[string]int{}
	return c, o
}

// expected returns, per session, the ids the edge acknowledged.
func (l *soakLoad) expected() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]string, len(l.sessions))
	for _, s := range l.sessions {
		failed := map[string]bool{}
		for _, id := range s.failed {
			failed[id] = true
		}
		var ids []string
		add := func(id string) {
			if !failed[id] {
				ids = append(ids, id)
			}
		}
		if s.started {
			add(s.id + "-start")
		}
		for t := range s.sent {
			add(fmt.Sprintf("%s-m%06d", s.id, t))
		}
		if s.ended {
			add(s.id + "-end")
		}
		out[s.id] = ids
	}
	return out
}
