package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// flakyEdge stands in front of a real ingest edge and plays a JetStream
// leader loss: once the replay reaches event failAt, the events of a batch
// from failAt on are answered 503 without being stored, and the next
// singles requests are answered 503 as a whole (no leader yet). With
// singles < 0 it never recovers.
type flakyEdge struct {
	upstream string
	failAt   int // index in the replay of the first event that fails
	singles  int

	mu      sync.Mutex
	sent    int // events forwarded so far (the replay sends in order)
	tripped bool
	calls   int
}

func (f *flakyEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var evs []json.RawMessage
	if err := json.Unmarshal(body, &evs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.calls++
	keep := len(evs)
	if f.tripped && f.singles != 0 {
		f.singles--
		keep = 0
	} else if !f.tripped && f.sent+len(evs) > f.failAt {
		f.tripped, keep = true, f.failAt-f.sent
	}
	f.mu.Unlock()
	results := make([]ingestsvc.EventResult, 0, len(evs))
	if keep > 0 {
		results = append(results, f.forward(r, evs[:keep])...)
	}
	for i := keep; i < len(evs); i++ {
		results = append(results, ingestsvc.EventResult{Index: i, Status: http.StatusServiceUnavailable,
			Error: "JetStream did not acknowledge the event in time; retry"})
	}
	f.mu.Lock()
	f.sent += keep
	f.mu.Unlock()
	status := http.StatusServiceUnavailable
	if keep == len(evs) {
		status = http.StatusAccepted
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(ingestsvc.Response{Accepted: keep, Results: results})
		return
	}
	if keep > 0 {
		status = http.StatusMultiStatus
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(events.Problem{Status: status, Results: results})
}

func (f *flakyEdge) forward(r *http.Request, evs []json.RawMessage) []ingestsvc.EventResult {
	b, _ := json.Marshal(evs)
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, f.upstream+"/v1/events", bytes.NewReader(b))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var res ingestsvc.Response
	_ = json.NewDecoder(resp.Body).Decode(&res)
	return res.Results
}

// storedIDs returns the event ids stored on a session's subject, in the
// order of its shard stream (the layout read from the server): as many as
// the stream counts on the subject.
func storedIDs(t *testing.T, js jetstream.JetStream, tenant, session string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	subject, stream := layout.Subject(tenant, session), layout.Stream(tenant, session)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	want := int(info.State.Subjects[subject])
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for len(ids) < want {
		batch, err := c.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatalf("reading %s after %d of %d: %v", subject, len(ids), want, err)
		}
		for m := range batch.Messages() {
			ids = append(ids, m.Headers().Get("ce-id"))
		}
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d events of %s", len(ids), want, subject)
		}
	}
	return ids
}

func fixtureIDs(t *testing.T, session string) []string {
	t.Helper()
	f, err := os.Open(demoFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := importer.ClaudeCode(f, importer.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res.Events))
	for i, e := range res.Events {
		ids[i] = e.ID()
	}
	return ids
}

// TestReplayRetries503InOrder: the edge loses its JetStream leader in the
// middle of a batch (the rest of the batch and the next requests are
// answered 503). The replay resends from the failed event, one at a time,
// so the session's records are stored exactly once and in file order. When
// the edge never recovers, the replay stops and says which events it could
// not store; running it again stores them, still in order.
func TestReplayRetries503InOrder(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS: natsconn.Config{URL: s.ClientURL()}, Config: provision.Config{Partitions: 2, MemoryStorage: true},
		HTTPAddr: "127.0.0.1:0", Tenants: "acme:" + ingestsvc.HashToken("tok"),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	_, js := s.Connect(t)
	want := fixtureIDs(t, "demo")

	edge := &flakyEdge{upstream: "http://" + svc.Addr(), failAt: 37, singles: 3}
	srv := httptest.NewServer(edge)
	defer srv.Close()
	var out bytes.Buffer
	err = runReplay(ctx, []string{demoFixture, "--http", srv.URL, "--token", "tok", "--session", "demo", "--batch", "25"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "(published 145, duplicates 0, rejected 0)") || !strings.Contains(out.String(), "retried:   1 times") {
		t.Errorf("summary:\n%s", out.String())
	}
	if got := storedIDs(t, js, "acme", "demo"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stored %d events, not in file order (first 40: %v)", len(got), got[:min(40, len(got))])
	}

	// An edge that never recovers: the replay stops at the first event it
	// cannot store and stores nothing after it.
	edge2 := &flakyEdge{upstream: "http://" + svc.Addr(), failAt: 60, singles: -1}
	srv2 := httptest.NewServer(edge2)
	defer srv2.Close()
	out.Reset()
	err = runReplay(ctx, []string{demoFixture, "--http", srv2.URL, "--token", "tok", "--session", "other", "--batch", "25", "--retry-for", "1s"}, &out)
	var ns *notStoredError
	if !errors.As(err, &ns) || ns.Next != 60 || !strings.Contains(err.Error(), "could not store event 61 of 145") {
		t.Fatalf("err = %v, want event 61 not stored\n%s", err, out.String())
	}
	want = fixtureIDs(t, "other")
	if got := storedIDs(t, js, "acme", "other"); strings.Join(got, ",") != strings.Join(want[:60], ",") {
		t.Fatalf("stored %d events after giving up, want the first 60 in order", len(got))
	}
	// The operator runs it again: the rest is stored after them, in order.
	out.Reset()
	if err := runReplay(ctx, []string{demoFixture, "--http", "http://" + svc.Addr(), "--token", "tok", "--session", "other"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := storedIDs(t, js, "acme", "other"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after the second run: %d events, not in file order", len(got))
	}
}
