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

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// TestReplayLargeEventOverNATS: a transcript with a 5 MB message — five
// times the server's max_payload — replays over NATS (a chunked request to
// the ingest endpoint, stored by claim check) and over HTTP; the reader
// serves the whole message both times.
func TestReplayLargeEventOverNATS(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := provision.Config{Partitions: 2, MemoryStorage: true}
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS: natsconn.Config{URL: s.ClientURL()}, Config: cfg, HTTPAddr: "127.0.0.1:0", Tenants: "acme:" + ingestsvc.HashToken("tok"),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	big := strings.Repeat("0123456789", 500_000)
	var b strings.Builder
	fmt.Fprintf(&b, `{"parentUuid":null,"isSidechain":false,"type":"user","sessionId":"big","uuid":"9b0c1d2e-0000-4000-a000-000000000001","timestamp":"2025-10-14T09:00:00.000Z","message":{"role":"user","content":"small"}}`+"\n")
	fmt.Fprintf(&b, `{"parentUuid":"9b0c1d2e-0000-4000-a000-000000000001","isSidechain":false,"type":"user","sessionId":"big","uuid":"9b0c1d2e-0000-4000-a000-000000000002","timestamp":"2025-10-14T09:00:01.000Z","message":{"role":"user","content":"%s"}}`+"\n", big)
	file := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	nc, _ := s.Connect(t)
	reader := transcript.NewReader(nc, cfg.Layout())
	for _, tc := range []struct {
		name, session string
		args          []string
	}{
		{"nats", "big-nats", []string{"--nats-url", s.ClientURL(), "--tenant", "acme", "--batch", "10"}},
		{"http", "big-http", []string{"--http", "http://" + svc.Addr(), "--token", "tok"}},
	} {
		var out bytes.Buffer
		if err := runReplay(ctx, append([]string{file, "--session", tc.session}, tc.args...), &out); err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out.String())
		}
		recs, err := reader.Read(ctx, "acme", tc.session, 1, 0, 0)
		if err != nil || len(recs) != 3 {
			t.Fatalf("%s: read %d records: %v", tc.name, len(recs), err)
		}
		if got := recs[2].Message.Content[0].Text; got != big {
			t.Fatalf("%s: served %d bytes of the large message, want %d", tc.name, len(got), len(big))
		}
	}
}
