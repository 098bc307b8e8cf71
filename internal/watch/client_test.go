package watch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/retry"
	"github.com/recallhq/recall/internal/watch"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// testEvents are n messages of session e, ids e-0, e-1, …
func testEvents(n int) []event.Event {
	s := eventtest.NewSession("", "e")
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = s.User(fmt.Sprint(i), "hi")
	}
	return evs
}

// TestClientSettles: a 429 is retried after its Retry-After, a per-event
// 503 from that event on, and a per-event 400 is reported and skipped
// while the rest of the batch is stored; a 401 ends Send at once.
func TestClientSettles(t *testing.T) {
	var mu sync.Mutex
	var calls []string // ids of each request
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []map[string]any
		json.NewDecoder(r.Body).Decode(&batch)
		var ids []string
		for _, e := range batch {
			ids = append(ids, e["id"].(string))
		}
		mu.Lock()
		calls, at = append(calls, strings.Join(ids, ",")), append(at, time.Now())
		n := len(calls)
		mu.Unlock()
		switch {
		case r.Header.Get("Authorization") != "Bearer tok":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"status":401,"detail":"missing or unknown bearer token"}`)
		case n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case n == 2:
			// e-0 stored, e-1 invalid, e-2 not acknowledged, e-3 not published.
			w.WriteHeader(http.StatusMultiStatus)
			json.NewEncoder(w).Encode(events.Problem{Status: 207, Results: []ingestsvc.EventResult{
				{Index: 0, ID: "e-0", Status: 202}, {Index: 1, ID: "e-1", Status: 400, Field: "data.role", Error: "bad"},
				{Index: 2, ID: "e-2", Status: 503}, {Index: 3, ID: "e-3", Status: 503}}})
		default:
			res := ingestsvc.Response{}
			for i, id := range ids {
				res.Results = append(res.Results, ingestsvc.EventResult{Index: i, ID: id, Status: 202, Duplicate: id == "e-3"})
			}
			w.WriteHeader(http.StatusAccepted)
			json.NewEncoder(w).Encode(res)
		}
	}))
	defer srv.Close()
	c := &watch.Client{URL: srv.URL, Token: "tok", Retry: retry.Policy{First: time.Millisecond, Max: time.Millisecond}}
	out, err := c.Send(context.Background(), testEvents(4))
	if err != nil {
		t.Fatal(err)
	}
	if out.Stored != 2 || out.Duplicates != 1 || len(out.Rejected) != 1 || out.Rejected[0].ID != "e-1" {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"e-0,e-1,e-2,e-3", "e-0,e-1,e-2,e-3", "e-2,e-3"}
	if strings.Join(calls, " ") != strings.Join(want, " ") {
		t.Fatalf("requests %q, want %q", calls, want)
	}
	if d := at[1].Sub(at[0]); d < 900*time.Millisecond {
		t.Fatalf("retried %v after a 429 with Retry-After: 1", d)
	}

	c.Token = "nope"
	_, err = c.Send(context.Background(), testEvents(1))
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("bad token: %v", err)
	}
}

// TestClientSplitsARefusedBatch: a batch refused whole (a body over the
// edge's limit) is sent again one event at a time; the event refused alone
// is rejected, the others are stored.
func TestClientSplitsARefusedBatch(t *testing.T) {
	c := &watch.Client{URL: tooLarge(t, "e-1").URL}
	out, err := c.Send(context.Background(), testEvents(3))
	if err != nil || out.Stored != 2 || len(out.Rejected) != 1 || out.Rejected[0].ID != "e-1" || out.Rejected[0].Status != 413 {
		t.Fatalf("batch over the limit: outcome %+v, %v", out, err)
	}
}

// tooLarge answers 413 without results to a request holding the event id
// big, as the edge does for a body over its limit, and stores the others.
func tooLarge(t *testing.T, big string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []map[string]any
		json.NewDecoder(r.Body).Decode(&batch)
		res := ingestsvc.Response{}
		for i, e := range batch {
			if e["id"] == big {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				fmt.Fprint(w, `{"status":413,"detail":"body over 17825792 bytes"}`)
				return
			}
			res.Results = append(res.Results, ingestsvc.EventResult{Index: i, ID: e["id"].(string), Status: 202})
		}
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(srv.Close)
	return srv
}
