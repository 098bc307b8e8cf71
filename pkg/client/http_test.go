package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// fast retries at once, for fakes that answer at once.
var fast = retry.Policy{First: time.Millisecond, Max: time.Millisecond}

// testEvents are n messages of session e, ids e-0, e-1, …
func testEvents(n int) []event.Event {
	s := eventtest.NewSession("", "e")
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = s.User(fmt.Sprint(i), "hi")
	}
	return evs
}

func newHTTP(t *testing.T, cfg client.HTTPConfig) *client.HTTP {
	t.Helper()
	c, err := client.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// batchIDs reads the ids of a batch request.
func batchIDs(r *http.Request) []string {
	var batch []map[string]any
	_ = json.NewDecoder(r.Body).Decode(&batch)
	var ids []string
	for _, e := range batch {
		ids = append(ids, e["id"].(string))
	}
	return ids
}

func accepted(w http.ResponseWriter, ids []string, dup func(string) bool) {
	rep := events.IngestReply{}
	for i, id := range ids {
		rep.Results = append(rep.Results, events.EventResult{Index: i, ID: id, Status: 202, Seq: uint64(i + 1), Duplicate: dup(id)})
	}
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(rep)
}

// TestHTTPPublishSettles: a 429 is retried after its Retry-After, a
// per-event 503 from that event on, and a per-event 400 is an EventError
// (not retried) while the rest of the batch is stored; a 401 ends the call
// at once, as an APIError carrying the edge's problem.
func TestHTTPPublishSettles(t *testing.T) {
	var mu sync.Mutex
	var calls []string // ids of each request
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids := batchIDs(r)
		mu.Lock()
		calls, at = append(calls, strings.Join(ids, ",")), append(at, time.Now())
		n := len(calls)
		mu.Unlock()
		switch {
		case r.Header.Get("Authorization") != "Bearer tok":
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(newProblem("unauthenticated", 401, "missing or unknown bearer token"))
		case n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case n == 2:
			// e-0 stored, e-1 invalid, e-2 not acknowledged, e-3 not published.
			w.WriteHeader(http.StatusMultiStatus)
			_ = json.NewEncoder(w).Encode(events.Problem{Status: 207, Results: []events.EventResult{
				{Index: 0, ID: "e-0", Status: 202, Seq: 7}, {Index: 1, ID: "e-1", Status: 400, Field: "data.role", Error: "bad"},
				{Index: 2, ID: "e-2", Status: 503}, {Index: 3, ID: "e-3", Status: 503}}})
		default:
			accepted(w, ids, func(id string) bool { return id == "e-3" })
		}
	}))
	defer srv.Close()
	var retried atomic.Int32
	c := newHTTP(t, client.HTTPConfig{URL: srv.URL, Token: "tok", Retry: fast, OnRetry: func(error) { retried.Add(1) }})
	res, err := c.PublishBatch(context.Background(), testEvents(4))
	var ee *client.EventError
	if !errors.As(err, &ee) || ee.Result.ID != "e-1" || ee.Result.Field != "data.role" || client.Retryable(err) {
		t.Fatalf("batch error %v, want e-1's rejection", err)
	}
	if res[0].Seq != 7 || res[1].Err == nil || res[2].Err != nil || res[3].Err != nil || !res[3].Duplicate {
		t.Fatalf("results %+v", res)
	}
	want := []string{"e-0,e-1,e-2,e-3", "e-0,e-1,e-2,e-3", "e-2,e-3"}
	if strings.Join(calls, " ") != strings.Join(want, " ") || retried.Load() != 2 {
		t.Fatalf("requests %q (%d retried), want %q", calls, retried.Load(), want)
	}
	if d := at[1].Sub(at[0]); d < 900*time.Millisecond {
		t.Fatalf("retried %v after a 429 with Retry-After: 1", d)
	}

	bad := newHTTP(t, client.HTTPConfig{URL: srv.URL, Token: "nope", Retry: fast})
	_, err = bad.Publish(context.Background(), testEvents(1)[0])
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Problem.Kind() != "unauthenticated" || client.Retryable(err) ||
		client.Status(err) != 401 || !errors.Is(err, client.ErrService) {
		t.Fatalf("bad token: %v", err)
	}
}

// TestHTTPSplitsARefusedBatch: a batch refused whole (a body over the
// edge's limit) is sent again one event at a time; the event refused alone
// is rejected, the others are stored.
func TestHTTPSplitsARefusedBatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids := batchIDs(r)
		for _, id := range ids {
			if id == "e-1" {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				fmt.Fprint(w, `{"status":413,"detail":"body over 17825792 bytes"}`)
				return
			}
		}
		accepted(w, ids, func(string) bool { return false })
	}))
	defer srv.Close()
	res, err := newHTTP(t, client.HTTPConfig{URL: srv.URL}).PublishBatch(context.Background(), testEvents(3))
	if err == nil || res[0].Err != nil || res[2].Err != nil || client.Status(res[1].Err) != 413 ||
		!strings.Contains(res[1].Err.Error(), "body over") {
		t.Fatalf("batch over the limit: %+v, %v", res, err)
	}
}

// TestHTTPRetriesOnlyWhatIsSafe: a read is retried on 503 until it
// succeeds; a call that acts (Compact) is not retried on a 503 (it may
// have acted) but is on a 429 (refused before acting); Attempts caps the
// attempts; an ambiguous reference's candidates come back in the Problem.
func TestHTTPRetriesOnlyWhatIsSafe(t *testing.T) {
	var reads, compacts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", events.MediaProblem)
		switch {
		case strings.HasSuffix(r.URL.Path, "/memory") && reads.Add(1) < 3:
			w.WriteHeader(503)
			fmt.Fprint(w, `{"status":503,"detail":"no service answers memory requests right now"}`)
		case strings.HasSuffix(r.URL.Path, "/memory"):
			fmt.Fprint(w, `{"key":"k","revision":4}`)
		case strings.HasSuffix(r.URL.Path, "/compact"):
			status := 429
			if compacts.Add(1) > 1 {
				status = 503
			}
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"status":%d}`, status)
		case r.URL.Path == "/v1/resolve":
			p := newProblem("ambiguous-reference", 409, "reference \"fix\" matches 2 sessions")
			p.Candidates = []events.Candidate{{Session: "s1", Name: "fix"}, {Session: "s2", Name: "fix-2"}}
			w.WriteHeader(409)
			_ = json.NewEncoder(w).Encode(p)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := newHTTP(t, client.HTTPConfig{URL: srv.URL, Retry: fast})
	if m, err := c.Memory(ctx, "s1"); err != nil || m.Revision != 4 || reads.Load() != 3 {
		t.Fatalf("memory after two 503s: %+v %v (%d reads)", m, err, reads.Load())
	}
	_, err := c.Compact(ctx, "s1", events.CompactRequest{})
	if client.Status(err) != 503 || compacts.Load() != 2 {
		t.Fatalf("compact: %v after %d requests, want one retry of the 429 and none of the 503", err, compacts.Load())
	}
	reads.Store(0)
	once := newHTTP(t, client.HTTPConfig{URL: srv.URL, Retry: fast, Attempts: 2})
	if _, err := once.Memory(ctx, "s1"); client.Status(err) != 503 || !client.Retryable(err) || reads.Load() != 2 {
		t.Fatalf("memory with 2 attempts: %v after %d reads", err, reads.Load())
	}
	_, err = c.Resolve(ctx, "fix")
	var ae *client.APIError
	if !errors.As(err, &ae) || len(ae.Problem.Candidates) != 2 || ae.Problem.Candidates[1].Session != "s2" || client.Retryable(err) {
		t.Fatalf("ambiguous reference: %v", err)
	}
}

// TestHTTPMasksTheURLPassword: a password in the URL appears in no error
// text, whether the edge is unreachable or the URL does not parse.
func TestHTTPMasksTheURLPassword(t *testing.T) {
	const secret = "s3cr3t-Pw"
	c := newHTTP(t, client.HTTPConfig{URL: "http://ada:" + secret + "@127.0.0.1:1", Attempts: 1})
	_, err := c.Memory(context.Background(), "s1")
	if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(c.URL(), secret) {
		t.Fatalf("unreachable edge: %v (%s)", err, c.URL())
	}
	for _, u := range []string{"http://ada:" + secret + "@host:port/", "ftp://ada:" + secret + "@host", "http://ada:" + secret + "@[::1"} {
		if _, err := client.NewHTTP(client.HTTPConfig{URL: u}); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("NewHTTP(%q): %v", u, err)
		}
	}
}

func newProblem(kind string, status int, detail string) *events.Problem {
	return &events.Problem{Type: events.ProblemTypeBase + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}
