package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/stack"
)

// TestSessionIndexCommands runs recall index, sessions ls|show, resolve
// and query against recall up's in-process stack.
func TestSessionIndexCommands(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	st, err := stack.Start(ctx, stack.Options{DataDir: t.TempDir(), HTTPAddr: addr, Log: log, Provider: llm.NewOffline()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pg := eventtest.NewSession("", "cli-pg")
	evs := []event.Event{pg.Started("start", events.SessionStarted{UserID: "dana"})}
	for i, text := range []string{"Migrate the orders table to Postgres 17.", "Let's use logical replication for the cutover."} {
		evs = append(evs, pg.User(fmt.Sprint("u", i), text), pg.Assistant(fmt.Sprint("a", i), "Done."))
	}
	postBatch(t, st.HTTPAddr, evs)
	cli := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		// --nats-url goes before a positional argument (resolve REF).
		if args[0] == "resolve" {
			args = []string{"resolve", "--nats-url", st.NATSURL, args[1]}
		} else {
			args = append(args, "--nats-url", st.NATSURL)
		}
		if err := run(ctx, args, &out); err != nil {
			t.Fatalf("recall %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	// The README's manual flow: extract, read the memory, compact.
	if out := cli("extract", "--session", "cli-pg"); !strings.Contains(out, "extracted default/cli-pg up to transcript seq") {
		t.Fatalf("extract:\n%s", out)
	}
	if out := cli("memory", "get", "--session", "cli-pg"); !strings.Contains(out, "Postgres 17") {
		t.Fatalf("memory get:\n%s", out)
	}
	if out := cli("compact", "--session", "cli-pg"); !strings.Contains(out, "Compaction of default/cli-pg") { // a tiny session: no_reduction
		t.Fatalf("compact:\n%s", out)
	}
	if out := cli("index", "--session", "cli-pg"); !strings.Contains(out, `indexed cli-pg as "migrate-orders-table-postgres"`) {
		t.Fatalf("index:\n%s", out)
	}
	if out := cli("sessions", "ls", "--q", "postgres"); !strings.Contains(out, "cli-pg") || !strings.Contains(out, "migrate-orders-table-postgres") {
		t.Fatalf("sessions ls:\n%s", out)
	}
	if out := cli("sessions", "show", "--session", "cli-pg"); !strings.Contains(out, "Migrate the orders table") {
		t.Fatalf("sessions show:\n%s", out)
	}
	if out := cli("resolve", "@@orders"); !strings.Contains(out, "orders → cli-pg (migrate-orders-table-postgres, matched by fuzzy)") {
		t.Fatalf("resolve:\n%s", out)
	}
	if out := cli("query", "--session", "migrate-orders-table-postgres", "--question", "How is the cutover done?"); !strings.Contains(out, "logical replication") || !strings.Contains(out, "source seq") {
		t.Fatalf("query:\n%s", out)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"resolve", "--nats-url", st.NATSURL, "nothing-here"}, &out); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown reference: %v", err)
	}
	// Long-term memory: "Use logical replication" is a decision (events).
	if out := cli("commit", "--session", "cli-pg"); !strings.Contains(out, "committed cli-pg for user dana") || !strings.Contains(out, "wrote self/events") {
		t.Fatalf("commit:\n%s", out)
	}
	if out := cli("ltm", "show", "--user", "dana"); !strings.Contains(out, "== self/events") || !strings.Contains(out, "logical replication") {
		t.Fatalf("ltm show:\n%s", out)
	}
	if out := cli("ltm", "history", "--user", "dana", "--type", "events"); !strings.Contains(out, "1 revision(s) of default.dana.self.events") ||
		!strings.Contains(out, "session cli-pg") || !strings.Contains(out, "+") || !strings.Contains(out, "logical replication") {
		t.Fatalf("ltm history:\n%s", out)
	}
	if err := run(ctx, []string{"ltm", "history", "--user", "dana", "--type", "hobbies", "--nats-url", st.NATSURL}, &out); err == nil || !strings.Contains(err.Error(), "no such memory document") {
		t.Fatalf("history of a missing document: %v", err)
	}
}

// postBatch stores evs through the HTTP edge at addr as one batch.
func postBatch(t *testing.T, addr string, evs []event.Event) {
	t.Helper()
	body, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ingest: %d", resp.StatusCode)
	}
}
