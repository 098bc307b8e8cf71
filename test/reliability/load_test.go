package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// sessionID names session i of a load run.
func sessionID(i int) string { return fmt.Sprintf("s%04d", i) }

// eventID names event n of a session; ids are unique per tenant.
func eventID(session string, n int) string { return fmt.Sprintf("%s-e%05d", session, n) }

// transcriptEvent builds event n of a session: user and assistant messages
// in turn, with a tool_use/tool_result pair every few turns, large enough for
// the trigger's thresholds to fire after a few dozen events.
// Every text starts with "<tenant>:<event id>:", so data that reaches the
// wrong tenant or session is recognisable.
func transcriptEvent(tenant, session string, n int, textBytes int) event.Event {
	id := eventID(session, n)
	m := events.Message{UUID: id}
	filler := fmt.Sprintf("%s:%s: %s", tenant, id, repeatWord("lorem", textBytes/6))
	switch {
	case n%8 == 2: // assistant calls a tool
		m.Role = events.RoleAssistant
		m.MessageID = "msg-" + id
		m.Content = events.Content{
			{Type: events.BlockText, Text: filler},
			{Type: events.BlockToolUse, ID: "tu-" + id, Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
		}
	case n%8 == 3: // its result
		m.Role = events.RoleUser
		m.Content = events.Content{{Type: events.BlockToolResult, ToolUseID: "tu-" + eventID(session, n-1),
			Content: events.Content{{Type: events.BlockText, Text: filler}}}}
	case n%2 == 0:
		m.Role = events.RoleUser
		m.Content = events.Content{{Type: events.BlockText, Text: filler}}
	default:
		m.Role = events.RoleAssistant
		m.MessageID = "msg-" + id
		m.StopReason = "end_turn"
		m.Content = events.Content{{Type: events.BlockText, Text: filler}}
	}
	e := eventtest.Session{ID: session, Source: "reliability-test"}.Message(fmt.Sprintf("e%05d", n), m) // id eventID(session, n)
	e.SetTime(time.Now())
	return e
}

func repeatWord(w string, n int) string {
	b := make([]byte, 0, n*(len(w)+1))
	for i := 0; i < n; i++ {
		b = append(b, w...)
		b = append(b, ' ')
	}
	return string(b)
}

// loadGen publishes the transcripts of many sessions through pkg/client:
// each session's events in order, in batches, retrying a failed batch until
// every event in it is acknowledged (the event ids make retries safe) and
// re-sending some acknowledged batches on purpose (duplicate publishes).
type loadGen struct {
	Tenant     string
	Sessions   int
	PerSession int
	Batch      int
	Workers    int
	TextBytes  int
	// DupEvery re-sends every DupEvery-th acknowledged batch (0: never).
	DupEvery int
	// Pause, when set, runs between batches of a worker (lets faults
	// interleave with the load).
	Pause time.Duration
	// Ordered publishes with client.Ordered: a session's events stay in
	// order across failed and retried batches.
	Ordered bool
	// OnBatch is called after each acknowledged batch (may be nil).
	OnBatch func(session string, lastEvent int)

	mu    sync.Mutex
	acked map[string]uint64 // event id -> stream sequence

	Published   atomic.Int64 // events acknowledged (first time)
	Duplicates  atomic.Int64 // acknowledgements flagged duplicate
	DupBatches  atomic.Int64 // batches re-sent on purpose
	Retries     atomic.Int64 // batches retried after an error
	Errors      atomic.Int64 // publish errors seen
	AckedAfter  atomic.Int64 // events acknowledged after Mark was called
	marked      atomic.Bool
	lastErrText atomic.Value
}

// Mark starts counting AckedAfter.
func (g *loadGen) Mark() { g.AckedAfter.Store(0); g.marked.Store(true) }

// Total is the number of distinct events the run publishes.
func (g *loadGen) Total() int { return g.Sessions * g.PerSession }

// Run publishes everything through conns (one client per worker, round
// robin) and returns when every event is acknowledged or ctx is done.
func (g *loadGen) Run(ctx context.Context, js []jetstream.JetStream) error {
	g.acked = make(map[string]uint64, g.Total())
	var wg sync.WaitGroup
	errc := make(chan error, g.Workers)
	for w := 0; w < g.Workers; w++ {
		var opts []client.Option
		if g.Ordered {
			opts = append(opts, client.Ordered())
		}
		cl, err := client.New(js[w%len(js)], g.Tenant, opts...)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := g.worker(ctx, w, cl); err != nil {
				errc <- err
			}
		}(w)
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func (g *loadGen) worker(ctx context.Context, w int, cl *client.Client) error {
	var mine []string
	for i := w; i < g.Sessions; i += g.Workers {
		mine = append(mine, sessionID(i))
	}
	next := make([]int, len(mine))
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	batches := 0
	for {
		active := 0
		for k, s := range mine {
			if next[k] >= g.PerSession {
				continue
			}
			active++
			n := min(g.Batch, g.PerSession-next[k])
			// Vary batch sizes so batches straddle tool pairs.
			if n > 1 {
				n = 1 + rng.IntN(n)
			}
			evs := make([]event.Event, n)
			for j := range evs {
				evs[j] = transcriptEvent(g.Tenant, s, next[k]+j, g.TextBytes)
			}
			if err := g.publish(ctx, cl, evs, false); err != nil {
				return err
			}
			batches++
			if g.DupEvery > 0 && batches%g.DupEvery == 0 {
				g.DupBatches.Add(1)
				if err := g.publish(ctx, cl, evs, true); err != nil {
					return err
				}
			}
			next[k] += n
			if g.OnBatch != nil {
				g.OnBatch(s, next[k]-1)
			}
			if g.Pause > 0 {
				select {
				case <-time.After(g.Pause):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if active == 0 {
			return nil
		}
	}
}

// publish sends evs until every one is acknowledged.
func (g *loadGen) publish(ctx context.Context, cl *client.Client, evs []event.Event, dup bool) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			g.Retries.Add(1)
			select {
			case <-time.After(time.Duration(min(attempt, 10)) * 50 * time.Millisecond):
			case <-ctx.Done():
				return fmt.Errorf("publishing %s: %w (last error: %v)", evs[0].ID(), ctx.Err(), g.lastErrText.Load())
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := cl.PublishBatch(pctx, evs)
		cancel()
		g.mu.Lock()
		for i, r := range res {
			if r.Err != nil {
				continue
			}
			id := evs[i].ID()
			if r.Duplicate {
				g.Duplicates.Add(1)
			}
			if prev, ok := g.acked[id]; ok {
				if prev != r.Seq && r.Seq != 0 {
					g.mu.Unlock()
					return fmt.Errorf("event %s acknowledged at seq %d and again at seq %d", id, prev, r.Seq)
				}
				continue
			}
			g.acked[id] = r.Seq
			g.Published.Add(1)
			if g.marked.Load() {
				g.AckedAfter.Add(1)
			}
		}
		g.mu.Unlock()
		if err == nil {
			return nil
		}
		g.Errors.Add(1)
		g.lastErrText.Store(err.Error())
		if ctx.Err() != nil {
			return fmt.Errorf("publishing %s: %w", evs[0].ID(), err)
		}
		_ = dup
	}
}

// Acked returns a copy of the acknowledged event ids and their sequences.
func (g *loadGen) Acked() map[string]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]uint64, len(g.acked))
	for k, v := range g.acked {
		out[k] = v
	}
	return out
}

// storedStats are the figures of verifyStoredOnce.
type storedStats struct {
	Stored int
	// Reordered counts sessions whose stored order differs from the order
	// their events were published in (possible when a pipelined batch
	// fails half way and is retried: its later events were stored first).
	Reordered int
	// FirstReorder describes the first reordering seen.
	FirstReorder string
}

// verifyStoredOnce reads every session back (from its shard stream, the
// layout read from the server) and checks that every acknowledged event is
// stored exactly once, at the acknowledged sequence, and that nothing else
// is stored. With strictOrder it also requires each session's events in
// publish order.
func verifyStoredOnce(t *testing.T, nc *nats.Conn, g *loadGen, strictOrder bool) storedStats {
	t.Helper()
	var st storedStats
	acked := g.Acked()
	if len(acked) != g.Total() {
		t.Errorf("%d of %d events acknowledged", len(acked), g.Total())
	}
	r := transcript.NewReader(nc, discoverLayout(t, nc))
	for i := 0; i < g.Sessions; i++ {
		s := sessionID(i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		recs, err := r.Read(ctx, g.Tenant, s, 0, 0, 0)
		cancel()
		if err != nil {
			t.Fatalf("reading session %s: %v", s, err)
		}
		seen := make(map[string]bool, len(recs))
		reordered := false
		for k, rec := range recs {
			id := rec.Event.ID()
			if seen[id] {
				t.Errorf("session %s: event %s stored twice", s, id)
			}
			seen[id] = true
			if want, ok := acked[id]; !ok {
				t.Errorf("session %s: event %s stored but never acknowledged", s, id)
			} else if want != rec.Seq {
				t.Errorf("session %s: event %s acknowledged at seq %d, stored at %d", s, id, want, rec.Seq)
			}
			if id != eventID(s, k) && !reordered {
				reordered = true
				st.Reordered++
				if st.FirstReorder == "" {
					st.FirstReorder = fmt.Sprintf("session %s: record %d is %s, published as %s", s, k, id, eventID(s, k))
				}
				if strictOrder {
					t.Errorf("session %s: record %d is %s, want %s (order)", s, k, id, eventID(s, k))
				}
			}
		}
		for n := 0; n < g.PerSession; n++ {
			if id := eventID(s, n); !seen[id] {
				t.Errorf("session %s: event %s (acknowledged: %v) is not stored", s, id, acked[id] != 0)
			}
		}
		st.Stored += len(recs)
		if t.Failed() {
			return st
		}
	}
	return st
}

// discoverLayout reads the transcript's shard count from the server.
func discoverLayout(t *testing.T, nc *nats.Conn) events.Layout {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	return layout
}
