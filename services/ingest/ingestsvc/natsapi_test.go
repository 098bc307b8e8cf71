package ingestsvc

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

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
	nc, _ := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var published atomic.Int64
	sub, err := nc.Subscribe(events.TranscriptSubject("acme", "*"), func(m *nats.Msg) {
		n := published.Add(1)
		time.AfterFunc(400*time.Millisecond, func() {
			_ = m.Respond(fmt.Appendf(nil, `{"stream":%q,"seq":%d}`, events.StreamTranscript, n))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	h := NewNATSHandler(nc, NewIngester(js, 1<<20, 5*time.Second), Limits{MaxEventBytes: 1 << 20, MaxBatchEvents: 100, MaxBodyBytes: 8 << 20}, 1)
	svc, err := micro.AddService(nc, micro.Config{Name: "ingest-shed-test", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	if err := svc.AddEndpoint(events.VerbIngest, h, micro.WithEndpointSubject(IngestEndpointSubject)); err != nil {
		t.Fatal(err)
	}
	subject := events.APISubject(events.VerbIngest, "acme", "s1")
	first := make(chan *nats.Msg, 1)
	go func() {
		m, err := nc.Request(subject, mustMarshal(t, structured("h1", "s1")), 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		first <- m
	}()
	deadline := time.Now().Add(5 * time.Second)
	for published.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
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
	var p Problem
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
	h.Wait()
	if n := published.Load(); n != 2 {
		t.Fatalf("%d events published, want 2 (the refused one never)", n)
	}
}
