package pcgroup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

// seqRecorder checks the invariant the extractor relies on: message n of a
// key starts only once message n-1 of that key finished (so never two of a
// key at once, never out of order), and runs once.
type seqRecorder struct {
	mu       sync.Mutex
	running  map[string]int // key → its messages running now
	done     map[string]int // key → its last finished message
	handled  int
	problems []string
	work     time.Duration
}

func newSeqRecorder(work time.Duration) *seqRecorder {
	return &seqRecorder{running: map[string]int{}, done: map[string]int{}, work: work}
}

func (r *seqRecorder) handler(member string) Handler {
	return func(ctx context.Context, m *Msg) error {
		key := strings.Split(m.Subject(), ".")[2] // pco.<p>.<key>
		n, _ := strconv.Atoi(string(m.Data()))
		r.mu.Lock()
		switch last := r.done[key]; {
		case r.running[key] > 0:
			r.problems = append(r.problems, fmt.Sprintf("key %s: %d started on %s while another of the key ran", key, n, member))
		case n > last+1:
			r.problems = append(r.problems, fmt.Sprintf("key %s: %d started on %s before %d finished", key, n, member, last+1))
		case n <= last:
			r.problems = append(r.problems, fmt.Sprintf("key %s: %d ran again on %s after %d finished", key, n, member, last))
		}
		r.running[key]++
		r.mu.Unlock()
		var err error
		select {
		case <-time.After(r.work):
		case <-ctx.Done():
			err = ctx.Err()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.running[key]--
		if err == nil {
			r.done[key] = max(r.done[key], n)
			r.handled++
		}
		return err
	}
}

func (r *seqRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled
}

// startOrderMember starts a keyed member of the "pco" group with two slots
// and eight messages held per partition, so that at a hand-over messages
// wait for a slot or for their key; with share it offers them to the
// others too.
func startOrderMember(t *testing.T, s *natstest.Server, id string, share bool, r *seqRecorder) *member {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	cfg := Config{
		Stream: "PCO", Partitions: parts,
		Filter:        func(p int) string { return fmt.Sprintf("pco.%d.>", p) },
		Durable:       func(p int) string { return fmt.Sprintf("pco-%d", p) },
		PriorityGroup: "g", Bucket: "OMEMBERS", Member: id,
		HeartbeatTTL: 2 * time.Second, AckWait: 10 * time.Second, FetchWait: 500 * time.Millisecond, DrainTimeout: 10 * time.Second,
		Concurrency: 2, KeyOf: func(subject string) string { return subject }, InFlight: 8,
	}
	if share {
		cfg.Share = "pco-share"
	}
	g, err := New(js, cfg, r.handler(id))
	if err != nil {
		t.Fatal(err)
	}
	if !share {
		return runMember(t, g, nc)
	}
	svc, err := micro.AddService(nc, micro.Config{Name: "pcgroup-order-test", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddShareEndpoints(svc); err != nil {
		t.Fatal(err)
	}
	m := runMember(t, g, nc, func() { _ = svc.Stop() })
	m.svc = svc
	return m
}

// Members join one after the other and then the first ones leave (a
// scale-out, then a rolling deploy) while every key's messages keep coming
// and each takes a while: at every hand-over the old owner holds messages
// that run, wait for a slot or wait for their key, and its last pull may
// still be open. No key may ever run a later message before an earlier one
// finished. (The members used to hand back every message that had not
// started; the next owner received two of a key in either order, as the
// extraction benchmark once saw at its start.)
func TestGroupHandOverKeepsKeyOrder(t *testing.T) {
	for _, share := range []bool{false, true} {
		t.Run(fmt.Sprintf("share=%v", share), func(t *testing.T) { testHandOverOrder(t, share) })
	}
}

func testHandOverOrder(t *testing.T, share bool) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PCO", Subjects: []string{"pco.*.*"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OMEMBERS", LimitMarkerTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	r := newSeqRecorder(20 * time.Millisecond)
	const keys, perKey = 24, 40
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		tick := time.NewTicker(40 * time.Millisecond) // a steady stream, so that every hand-over happens under traffic
		defer tick.Stop()
		for n := 1; n <= perKey; n++ {
			for k := range keys {
				if _, err := js.Publish(ctx, fmt.Sprintf("pco.%d.k%d", k%parts, k), []byte(strconv.Itoa(n))); err != nil {
					t.Error(err)
					return
				}
			}
			<-tick.C
		}
	}()
	// Each change waits until some more messages were handled, so that it
	// happens while the members are busy.
	busy := func(what string) {
		t.Helper()
		from := r.count()
		testpoll.Until(t, 30*time.Second, what, func() bool { return r.count() >= from+keys })
	}
	var ms []*member
	for _, id := range []string{"a", "b", "c", "d"} {
		ms = append(ms, startOrderMember(t, s, id, share, r))
		busy("messages handled after " + id + " joined")
	}
	for _, m := range ms[:2] {
		m.cancel()
		<-m.done
		busy("messages handled after " + m.g.Member() + " left")
	}
	<-pubDone
	testpoll.Until(t, 60*time.Second, "every message handled and acknowledged", func() bool {
		info, err := js.Stream(ctx, "PCO")
		return r.count() >= keys*perKey && err == nil && info.CachedInfo().State.Msgs == 0
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		t.Fatalf("%d ordering problems, e.g.\n%s", len(r.problems), strings.Join(r.problems[:min(len(r.problems), 5)], "\n"))
	}
}

// startSlowMember starts a keyed member of a one-partition "pco" group
// whose pin lapses after a second without a pull request, with one slot
// and two messages held.
func startSlowMember(t *testing.T, s *natstest.Server, id string, r *seqRecorder) *member {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	g, err := New(js, Config{
		Stream: "PCO", Partitions: 1,
		Filter:        func(p int) string { return fmt.Sprintf("pco.%d.>", p) },
		Durable:       func(p int) string { return fmt.Sprintf("pco-%d", p) },
		PriorityGroup: "g", Bucket: "OMEMBERS", Member: id,
		HeartbeatTTL: 2 * time.Second, AckWait: 10 * time.Second, PinnedTTL: time.Second, FetchWait: 300 * time.Millisecond,
		DrainTimeout: 20 * time.Second,
		Concurrency:  1, KeyOf: func(subject string) string { return subject }, InFlight: 2,
	}, r.handler(id))
	if err != nil {
		t.Fatal(err)
	}
	return runMember(t, g, nc)
}

// A hand-over whose handlers run longer than PinnedTTL: the old owner
// does not pull while its slots are busy or while it drains, yet the next
// owner must not be pinned (and start the key's later messages) before the
// old owner settled what it holds.
func TestGroupHandOverOutlastsThePin(t *testing.T) {
	for _, tc := range []struct {
		name string
		move func(t *testing.T, s *natstest.Server, a *member, r *seqRecorder) *member
	}{
		// b joins (and takes the partition, which b wins over a) while a's
		// slots have been busy for longer than the pin.
		{"join", func(t *testing.T, s *natstest.Server, a *member, r *seqRecorder) *member {
			return startSlowMember(t, s, "b", r)
		}},
		// a leaves and drains for longer than the pin.
		{"leave", func(t *testing.T, s *natstest.Server, a *member, r *seqRecorder) *member {
			a.cancel()
			return startSlowMember(t, s, "b", r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := natstest.Start(t)
			_, js := s.Connect(t)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PCO", Subjects: []string{"pco.*.*"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OMEMBERS", LimitMarkerTTL: time.Second}); err != nil {
				t.Fatal(err)
			}
			r := newSeqRecorder(1500 * time.Millisecond)
			a := startSlowMember(t, s, "a", r)
			testpoll.Until(t, 15*time.Second, "a owning the partition", func() bool { return len(a.g.Owned()) == 1 })
			const n = 5
			for i := 1; i <= n; i++ {
				if _, err := js.Publish(ctx, "pco.0.k", []byte(strconv.Itoa(i))); err != nil {
					t.Fatal(err)
				}
			}
			// a holds 1 (running) and 2: its slots are busy until 1 ends.
			testpoll.Until(t, 15*time.Second, "the first message running", func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				return r.running["k"] > 0
			})
			b := tc.move(t, s, a, r)
			testpoll.Until(t, 15*time.Second, "b owning the partition", func() bool { return len(b.g.Owned()) == 1 })
			testpoll.Until(t, 60*time.Second, "every message handled", func() bool { return r.count() >= n })
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.problems) > 0 {
				t.Fatalf("%d ordering problems, e.g.\n%s", len(r.problems), strings.Join(r.problems[:min(len(r.problems), 5)], "\n"))
			}
		})
	}
}
