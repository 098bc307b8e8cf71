package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// longTranscript writes a Claude Code JSONL transcript of n user messages.
func longTranscript(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	parent := "null"
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("9b0c1d2e-0000-4000-a000-%012d", i)
		fmt.Fprintf(&b, `{"parentUuid":%s,"isSidechain":false,"type":"user","sessionId":"long","uuid":"%s","timestamp":"2025-10-14T09:%02d:%02d.000Z","message":{"role":"user","content":"message %d %s"}}`+"\n",
			parent, id, (i/60)%60, i%60, i, strings.Repeat("x", 200))
		parent = `"` + id + `"`
	}
	p := filepath.Join(t.TempDir(), "long.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReplayUnderLeaderLoss replays a long transcript through a real
// ingest on a three-node cluster (R3) and stops the leader of the session's
// transcript shard in the middle: the replay finishes, and the session's records are
// stored once each, in file order — one event per request, and batches of
// 50 (the ingest publishes a session's events of a request one after the
// other and stops at the first that is not stored) — over HTTP and over
// NATS, where the replay's own connection may be to the stopped node (its
// reply lost: the request is resent, the ids make it safe).
func TestReplayUnderLeaderLoss(t *testing.T) {
	for _, tc := range []struct{ transport, batch string }{{"http", "1"}, {"http", "50"}, {"nats", "50"}} {
		t.Run(tc.transport+",batch="+tc.batch, func(t *testing.T) { replayUnderLeaderLoss(t, tc.transport, tc.batch) })
	}
}

func replayUnderLeaderLoss(t *testing.T, transport, batch string) {
	c := natstest.StartCluster(t, 3)
	urls := c.URLs()
	prov := provision.Config{Replicas: 3, Partitions: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS: natsconn.Config{URL: urls}, Config: prov,
		HTTPAddr: "127.0.0.1:0", Tenants: "acme:" + ingestsvc.HashToken("tok"), PublishTimeout: 2 * time.Second,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	const n = 3000
	file := longTranscript(t, n)
	done := make(chan error, 1)
	var out bytes.Buffer
	args := []string{file, "--http", "http://" + svc.Addr(), "--token", "tok", "--batch", batch}
	if transport == "nats" {
		args = []string{file, "--nats-url", urls, "--tenant", "acme", "--batch", batch, "--attempt-timeout", "5s"}
	}
	go func() { done <- runReplay(ctx, args, &out) }()
	// The session's records live in one shard stream: stop its leader.
	st, err := js.Stream(ctx, prov.Layout().Stream("acme", "long"))
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 60*time.Second, "a third of the events", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs >= n/3
	})

	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := c.Index(info.Cluster.Leader); i >= 0 {
		c.Stop(i)
		t.Logf("stopped the session's shard leader %s at %d events", info.Cluster.Leader, info.State.Msgs)
	}
	if err := <-done; err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	t.Logf("replay summary:\n%s", out.String())
	if strings.Contains(out.String(), "reordered:") {
		t.Errorf("the replay saw events stored before an earlier event of their batch:\n%s", out.String())
	}

	f, _ := os.Open(file)
	res, err := importer.ClaudeCode(f, importer.Options{})
	f.Close()
	// The importer adds a session.started event before the n records.
	if err != nil || len(res.Events) != n+1 {
		t.Fatalf("import: %d events, %v", len(res.Events), err)
	}
	want := make([]string, n+1)
	for i, e := range res.Events {
		want[i] = e.ID()
	}
	got := storedIDs(t, js, "acme", "long")
	if len(got) != n+1 {
		t.Fatalf("%d events stored, want %d", len(got), n+1)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stored out of order at %d: %s, want %s", i, got[i], want[i])
		}
	}
}
