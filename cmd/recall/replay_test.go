package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

const demoFixture = "../../internal/importer/testdata/coding-session.jsonl"

// TestReplayAgainstIngest replays the demo fixture through a real ingest
// service over HTTP, then again over NATS: the second run stores nothing new.
func TestReplayAgainstIngest(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS:     natsconn.Config{URL: s.ClientURL()},
		Config:   provision.Config{Partitions: 2, MemoryStorage: true},
		HTTPAddr: "127.0.0.1:0",
		Tenants:  "acme:" + ingestsvc.HashToken("tok"),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	_, js := s.Connect(t)

	var out bytes.Buffer
	err = runReplay(ctx, []string{demoFixture, "--http", "http://" + svc.Addr(), "--token", "tok", "--session", "demo"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"as session demo", "events:    145 (published 145, duplicates 0, rejected 0)", "skipped:   file-history-snapshot 6, meta 1, summary 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	layout := provision.Config{}.Layout()
	st, err := js.Stream(ctx, layout.Stream("acme", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	if info.State.Msgs != 145 {
		t.Fatalf("%d events stored, want 145", info.State.Msgs)
	}
	if _, err := st.GetLastMsgForSubject(ctx, layout.Subject("acme", "demo")); err != nil {
		t.Fatalf("nothing on the acme/demo subject: %v", err)
	}

	out.Reset()
	err = runReplay(ctx, []string{"--nats-url", s.ClientURL(), "--tenant", "acme", "--session", "demo", demoFixture}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "(published 0, duplicates 145, rejected 0)") {
		t.Errorf("second replay:\n%s", out.String())
	}
	info, _ = st.Info(ctx)
	if info.State.Msgs != 145 {
		t.Fatalf("%d events stored after the replay, want still 145", info.State.Msgs)
	}

	// A wrong token fails with the edge's message.
	out.Reset()
	err = runReplay(ctx, []string{demoFixture, "--http", "http://" + svc.Addr(), "--token", "nope"}, &out)
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized: missing or unknown bearer token") {
		t.Fatalf("bad token: %v", err)
	}
}

// With nothing listening at the URL (here from RECALL_URL) replay fails at
// once with one error that says so, instead of retrying.
func TestReplayNothingListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv("RECALL_URL", url)
	start := time.Now()
	var out bytes.Buffer
	err = runReplay(context.Background(), []string{demoFixture, "--session", "demo"}, &out)
	if err == nil || !strings.Contains(err.Error(), "nothing answers at "+url) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("failed after %v", d)
	}
	if out.Len() != 0 {
		t.Fatalf("printed besides the error:\n%s", out.String())
	}
}

// A file with nothing importable is an error that says what it held.
func TestReplayNothingToImport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.jsonl")
	if err := os.WriteFile(path, []byte(`{"type":"summary","summary":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runReplay(context.Background(), []string{path, "--session", "s1", "--http", "http://127.0.0.1:1"}, io.Discard)
	if !errors.Is(err, errNothingToImport) || !strings.Contains(err.Error(), "skipped: summary 1") {
		t.Fatalf("error: %v", err)
	}
}
