package client_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// startEdge runs a real ingest service (HTTP edge) for tenant acme (token
// "tok") on an embedded NATS, and returns its URL and the transcript's
// record count.
func startEdge(t *testing.T) (string, func() uint64) {
	t.Helper()
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	pc := provision.Config{Partitions: 1, MemoryStorage: true}
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS: natsconn.Config{URL: s.ClientURL()}, Config: pc, HTTPAddr: "127.0.0.1:0",
		Tenants: "acme:" + ingestsvc.HashToken("tok"),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()); cancel() })
	_, js := s.Connect(t)
	records := func() (n uint64) {
		for _, name := range pc.Layout().Streams() {
			st, err := js.Stream(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			n += st.CachedInfo().State.Msgs
		}
		return n
	}
	return "http://" + svc.Addr(), records
}

// TestHTTPResendsALostReply: the edge stores a batch but its answer never
// reaches the client; the attempt's own deadline ends the wait — half of
// the call's 4 s, as the default 30 s per attempt would outlast it; had it
// been the call's deadline, nothing would be left to retry with — the batch is sent again with the same ids, the edge
// answers them as duplicates, and every event is stored once.
func TestHTTPResendsALostReply(t *testing.T) {
	edge, records := startEdge(t)
	target, _ := url.Parse(edge)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var requests atomic.Int32
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			proxy.ServeHTTP(w, r)
			return
		}
		// Forward the first request, drop its answer, and hang until the
		// client gives up on it.
		body, _ := io.ReadAll(r.Body)
		fwd, _ := http.NewRequest(r.Method, edge+r.URL.Path, bytes.NewReader(body))
		fwd.Header = r.Header.Clone()
		if resp, err := http.DefaultClient.Do(fwd); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		<-r.Context().Done()
	}))
	defer lossy.Close()

	c := newHTTP(t, client.HTTPConfig{URL: lossy.URL, Token: "tok", Retry: fast})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	res, err := c.PublishBatch(ctx, testEvents(5))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Duplicate || r.Seq != uint64(i+1) {
			t.Fatalf("event %d after a lost reply: %+v, want the original's seq as a duplicate", i, r)
		}
	}
	if n := records(); n != 5 || requests.Load() != 2 {
		t.Fatalf("%d records after %d requests, want 5 after 2", n, requests.Load())
	}
}
