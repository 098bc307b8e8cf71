package ingestsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/pkg/events"
)

func TestMain(m *testing.M) {
	// Real SDK providers and the W3C propagator, as in production.
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{TraceSample: 1}, "ingest-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = tel.Shutdown(context.Background())
	os.Exit(code)
}

const (
	tokenAcme = "acme-secret-token"
	tokenBeta = "beta-secret-token"
)

// env is a running ingest service on an embedded JetStream.
type env struct {
	t    *testing.T
	srv  *natstest.Server
	svc  *Service
	nc   *nats.Conn
	js   jetstream.JetStream
	base string
	// layout is the transcript's shards as the service provisioned them.
	layout events.Layout
}

func startEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	s := natstest.Start(t)
	cfg := Config{
		NATS:     natsconn.Config{URL: s.ClientURL()},
		Config:   provision.Config{Partitions: 2, MemoryStorage: true},
		HTTPAddr: "127.0.0.1:0",
		Tenants:  "acme:" + HashToken(tokenAcme) + ", beta:" + HashToken(tokenBeta),
	}
	if mod != nil {
		mod(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	svc, err := Start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})
	// API replies go only to the requesting tenant's inbox prefix.
	nc, js := s.Connect(t, nats.CustomInboxPrefix(events.InboxPrefix("acme")))
	return &env{t: t, srv: s, svc: svc, nc: nc, js: js, base: "http://" + svc.Addr(), layout: cfg.Layout()}
}

// post sends a request to the edge and returns the status and body.
func (e *env) post(path, token string, hdr map[string]string, body []byte) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// stored returns every message of the transcript's shard streams, in the
// order they were stored (each stream's order, merged by stored time).
func (e *env) stored() []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*jetstream.RawStreamMsg
	for _, name := range e.layout.Streams() {
		st, err := e.js.Stream(ctx, name)
		if err != nil {
			e.t.Fatal(err)
		}
		info := st.CachedInfo()
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				e.t.Fatalf("reading seq %d of %s: %v", seq, name, err)
			}
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b *jetstream.RawStreamMsg) int { return a.Time.Compare(b.Time) })
	return out
}

// testLayout is the transcript layout of the tests that run an Ingester
// on its own, against a fake stream.
var testLayout = events.NewLayout(events.DefaultShards)

// fakeAck is the acknowledgement a fake transcript shard stream answers m
// with, storing it at seq.
func fakeAck(m *nats.Msg, seq int64) []byte {
	k, _, _, _ := events.ParseTranscriptSubject(m.Subject)
	return fmt.Appendf(nil, `{"stream":%q,"seq":%d}`, events.TranscriptShardStream(k), seq)
}

// message returns the data of a valid transcript message event.
func message(uuid, text string) map[string]any {
	return map[string]any{"uuid": uuid, "role": "user", "content": text}
}

// structured returns a structured-mode event as a map, for tests to mutate.
func structured(id, session string) map[string]any {
	return map[string]any{
		"specversion":     "1.0",
		"id":              id,
		"source":          "test/platform",
		"type":            events.TypeMessage,
		"subject":         session,
		"time":            "2026-01-02T03:04:05Z",
		"datacontenttype": "application/json",
		"data":            message("u-"+id, "hello "+id),
	}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitUntil polls cond until it holds or the deadline passes.

func contains(s, sub string) bool { return strings.Contains(s, sub) }
