package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natsperm"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// TestReplayResendsALostReply: the ingest stores a request's events but its
// reply never reaches replay (a proxy drops it, as a node that dies between
// the two would). Replay gives the attempt up before its retry window ends,
// resends the same events — answered as duplicates — and finishes; every
// event is stored once. Before each attempt had its own deadline the lost
// reply was waited for longer than the whole window and replay stopped.
func TestReplayResendsALostReply(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS:   natsconn.Config{URL: s.ClientURL()},
		Config: provision.Config{Partitions: 2, MemoryStorage: true},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	proxy := natstest.DropReplies(t, s.Addr().String(), natsperm.InboxPrefix("acme"), 1)

	var out bytes.Buffer
	start := time.Now()
	err = runReplay(ctx, []string{"--nats-url", proxy.URL(), "--tenant", "acme", "--session", "demo",
		"--batch", "50", "--retry-for", "8s", demoFixture}, &out)
	if err != nil {
		t.Fatalf("replay after %v: %v\n%s", time.Since(start), err, out.String())
	}
	if proxy.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", proxy.Dropped())
	}
	// The lost reply's 50 events were stored by the first attempt: the
	// resend finds them as duplicates.
	if !strings.Contains(out.String(), "(published 95, duplicates 50, rejected 0)") || !strings.Contains(out.String(), "resent:    1 ") {
		t.Errorf("summary:\n%s", out.String())
	}
	_, js := s.Connect(t)
	ids := storedIDs(t, js, "acme", "demo")
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("event %s stored twice", id)
		}
		seen[id] = true
	}
	if len(ids) != 145 {
		t.Fatalf("%d events stored, want 145", len(ids))
	}
}
