package ingestsvc

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/pkg/events"
)

// TestNATSEndpointShedsWhenEverySlotWaits runs the NATS endpoint with one
// slot while acknowledgements are slow (a responder on the transcript
// subject answers after 400 ms, standing in for a stream that is slow): a
// second request is refused at once with a 503 and nothing of it is
// published; the first is accepted; once its slot is free the next one is
// accepted too. Without shedding the second request would wait unseen in
// the subscription's buffer.
func TestNATSEndpointShedsWhenEverySlotWaits(t *testing.T) {
	s := natstest.Start(t)
	// The requester replies in acme's reply space (internal/replyspace).
	nc, _ := s.Connect(t, nats.CustomInboxPrefix(events.InboxPrefix("acme")))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var published atomic.Int64
	sub, err := nc.Subscribe(events.TenantTranscripts("acme"), func(m *nats.Msg) {
		n := published.Add(1)
		time.AfterFunc(400*time.Millisecond, func() {
			_ = m.Respond(fakeAck(m, int64(n)))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	later := microapi.NewLater(context.Background(), nc, slog.Default(), 0)
	h := NewNATSHandler(later, NewIngester(js, testLayout, 1<<20, 5*time.Second), Limits{MaxEventBytes: 1 << 20, MaxBatchEvents: 100, MaxBodyBytes: 8 << 20}, 1)
	svc, err := microapi.Serve(later, microapi.Service{Name: "ingest-shed-test", Endpoints: []microapi.Endpoint{h.endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	subject := events.APISubject(events.VerbIngest, "acme", "s1")
	first := make(chan *nats.Msg, 1)
	go func() {
		m, err := nc.Request(subject, mustMarshal(t, structured("h1", "s1")), 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		first <- m
	}()
	testpoll.Until(t, 5*time.Second, "the first request to reach the publisher", func() bool { return published.Load() > 0 })
	asked := time.Now()
	m, err := nc.Request(subject, mustMarshal(t, structured("h2", "s1")), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "503" {
		t.Fatalf("second request: code %q, body %s", code, m.Data)
	}
	if waited := time.Since(asked); waited > 300*time.Millisecond {
		t.Fatalf("the refusal took %s: it waited for the slot", waited)
	}
	var p events.Problem
	if err := json.Unmarshal(m.Data, &p); err != nil || p.Status != 503 || !contains(p.Detail, "nothing of this request was stored") {
		t.Fatalf("refusal problem: %+v %v", p, err)
	}
	if m := <-first; m == nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("first request: %+v", m)
	}
	m, err = nc.Request(subject, mustMarshal(t, structured("h3", "s1")), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("third request, after the slot was free: %v %+v", err, m)
	}
	later.Stop(context.Background())
	if n := published.Load(); n != 2 {
		t.Fatalf("%d events published, want 2 (the refused one never)", n)
	}
}

// TestSessionOrderWithinARequest publishes requests through the Ingester to
// a stand-in for a stream that answers after 30 ms and refuses event "o2":
// a session's events are published one after the other (never two of one
// session outstanding), sessions side by side; when one is not stored the
// session's later events are not published at all (503, not attempted),
// while another session's events are stored.
func TestSessionOrderWithinARequest(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	outstanding := map[string]int{}
	var seen []string
	overlap := ""
	sub, err := nc.Subscribe(events.TenantTranscripts("acme"), func(m *nats.Msg) {
		id := m.Header.Get("ce-id")
		mu.Lock()
		seen = append(seen, id)
		outstanding[m.Subject]++
		if outstanding[m.Subject] > 1 && overlap == "" {
			overlap = id
		}
		n := len(seen)
		mu.Unlock()
		time.AfterFunc(30*time.Millisecond, func() {
			mu.Lock()
			outstanding[m.Subject]--
			mu.Unlock()
			if id == "o2" {
				_ = m.Respond([]byte(`{"error":{"code":503,"err_code":10008,"description":"stream leader lost"}}`))
				return
			}
			_ = m.Respond(fakeAck(m, int64(n)))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	in := NewIngester(js, testLayout, 1<<20, 5*time.Second)
	var items []item
	for _, e := range [][2]string{{"o1", "s1"}, {"p1", "s2"}, {"o2", "s1"}, {"p2", "s2"}, {"o3", "s1"}, {"p3", "s2"}, {"o4", "s1"}} {
		items = append(items, decodeStructured(mustMarshal(t, structured(e[0], e[1])), 1<<20))
	}
	res := in.submit(context.Background(), "acme", "", items).wait(context.Background())
	want := map[string]int{"o1": 202, "p1": 202, "o2": 503, "p2": 202, "o3": 503, "p3": 202, "o4": 503}
	for _, r := range res {
		if r.Status != want[r.ID] {
			t.Errorf("%s: status %d (%s), want %d", r.ID, r.Status, r.Error, want[r.ID])
		}
	}
	if r := res[4]; !contains(r.Error, "not published") {
		t.Errorf("o3's error %q does not say it was not published", r.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap != "" {
		t.Errorf("%s was published while an earlier event of its session was outstanding", overlap)
	}
	for _, id := range seen {
		if id == "o3" || id == "o4" {
			t.Errorf("%s was published after o2 failed (published: %v)", id, seen)
		}
	}
}
