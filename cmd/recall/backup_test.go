package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/stack"
)

// drillSessions are the drill's sessions; the last is erased.
var drillSessions = []struct{ id, user, ask, answer string }{
	{"bk-pg", "dana", "Migrate the orders table to Postgres 17.", "Let's use logical replication for the cutover."},
	{"bk-go", "dana", "Port the billing worker to Go 1.26.", "Let's keep the retry queue in NATS."},
	{"bk-doomed", "erin", "My card number is in this session, QUOKKA-BK.", "Let's erase it later."},
}

// TestRestoreDrill is the restore drill of docs/operations.md against
// recall up's stack: sessions written, extracted, indexed and committed
// to long-term memory, one erased, the tenant configuration set twice;
// `recall backup`; the stack stopped and a new empty data directory
// restored with `recall restore --data`; the stack started on it. Memory,
// index, long-term memory and commit records, the configuration and its
// history (every revision of every key) and the compaction replies are
// the same bytes as before; the erased session stays erased (nothing
// stored, its events refused). Restoring into the used directory again is
// refused; backing up the stopped stack's directory (--data) works.
func TestRestoreDrill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st := drillStack(t, ctx, t.TempDir())
	cli := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, append(args, "--nats-url", st.NATSURL), &out); err != nil {
			t.Fatalf("recall %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	doomed := drillWrite(t, st, cli)
	before := drillState(t, ctx, st.NATSURL)
	dir := filepath.Join(t.TempDir(), "backup")
	if out := cli("backup", dir); !strings.Contains(out, "Backed up") {
		t.Fatalf("backup: %s", out)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	var out bytes.Buffer
	if err := run(ctx, []string{"restore", dir, "--data", data}, &out); err != nil || !strings.Contains(out.String(), "erased again: default/"+doomed) {
		t.Fatalf("restore: %v\n%s", err, out.String())
	}
	st2 := drillStack(t, ctx, data)
	after := drillState(t, ctx, st2.NATSURL)
	compareState(t, before, after)
	checkErased(t, ctx, st2, doomed)
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}
	err := run(ctx, []string{"restore", dir, "--data", data}, &out)
	if err == nil || !strings.Contains(err.Error(), "nothing was restored") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("a restore into the used data directory: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"backup", filepath.Join(t.TempDir(), "again"), "--data", data}, &out); err != nil || !strings.Contains(out.String(), "Backed up the data directory") {
		t.Fatalf("a backup of the stopped stack's data directory: %v\n%s", err, out.String())
	}
}

// drillWrite writes the drill's sessions, extracts (twice), indexes and
// commits each, erases the last and sets the tenant configuration twice;
// it returns the erased session.
func drillWrite(t *testing.T, st *stack.Stack, cli func(...string) string) string {
	t.Helper()
	for _, s := range drillSessions {
		sess := eventtest.NewSession("", s.id)
		postBatch(t, st.HTTPAddr, []event.Event{sess.Started("start", events.SessionStarted{UserID: s.user}),
			sess.User("u0", s.ask), sess.Assistant("a0", "Done."), sess.User("u1", s.answer), sess.Assistant("a1", "Done.")})
		cli("extract", "--session", s.id)
		// A second part, long enough for a served compaction, and a
		// second memory revision.
		var evs []event.Event
		for i := range 30 {
			evs = append(evs, sess.User(fmt.Sprint("w", i), fmt.Sprintf("Step %d: %s", i, strings.Repeat("check the replica lag and the row counts again; ", 12))),
				sess.Assistant(fmt.Sprint("r", i), fmt.Sprintf("Step %d is done: %s", i, strings.Repeat("the counts match and the lag is under a second; ", 12))))
		}
		postBatch(t, st.HTTPAddr, evs)
		cli("extract", "--session", s.id)
		cli("index", "--session", s.id)
		cli("commit", "--session", s.id)
	}
	doomed := drillSessions[len(drillSessions)-1].id
	cli("erase", "--session", doomed)
	for _, doc := range []string{`{"minimum_tokens_between_update": 3000}`, `{"minimum_tokens_between_update": 4000, "session_memory": true}`} {
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), []string{"tenant", "set", path, "--recall-url", "http://" + st.HTTPAddr}, &out); err != nil {
			t.Fatalf("tenant set: %v", err)
		}
	}
	return doomed
}

// drillStack starts recall up's stack on data with the offline model.
func drillStack(t *testing.T, ctx context.Context, data string) *stack.Stack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := stack.Start(ctx, stack.Options{DataDir: data, HTTPAddr: "127.0.0.1:0", Log: log, Provider: llm.NewOffline()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// drillState is what the drill compares: every revision of every key of
// the buckets that hold what Recall derived or was told (key → revision
// → value), and each live session's compaction reply (its timings
// zeroed).
func drillState(t *testing.T, ctx context.Context, url string) map[string]string {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	out := map[string]string{}
	for _, b := range []string{events.BucketMemory, events.BucketIndex, events.BucketLTM, events.BucketLTMState, events.BucketConfig} {
		s, err := js.Stream(ctx, "KV_"+b)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo().State
		for seq := info.FirstSeq; seq > 0 && seq <= info.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%s #%d %s", b, seq, m.Subject)] = string(m.Data)
		}
	}
	for _, s := range drillSessions[:len(drillSessions)-1] {
		r, _, err := requestCompaction(ctx, nc, "default", s.id, events.CompactRequest{Trigger: events.TriggerManual, MinTokens: 1})
		if err != nil {
			t.Fatalf("compacting %s: %v", s.id, err)
		}
		r.WaitedMS, r.DurationUS = 0, 0
		b, _ := json.Marshal(r)
		out["compact "+s.id] = string(b)
	}
	return out
}

func compareState(t *testing.T, before, after map[string]string) {
	t.Helper()
	for want, least := range map[string]int{events.BucketMemory: 4, events.BucketIndex: 2, events.BucketLTM: 1, events.BucketConfig: 2, "compact": 2} {
		n := 0
		for k := range before {
			if strings.HasPrefix(k, want+" ") {
				n++
			}
		}
		if n < least {
			t.Fatalf("the drill stored %d revisions in %s before the backup, want %d or more: %v", n, want, least, before)
		}
	}
	for k, v := range before {
		if got, ok := after[k]; !ok || got != v {
			t.Errorf("%s after the restore:\n%.300s\nbefore:\n%.300s", k, got, v)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s is new after the restore: %.300s", k, after[k])
		}
	}
}

// checkErased: nothing of the erased session is stored and its events are
// refused while its tombstone lives.
func checkErased(t *testing.T, ctx context.Context, st *stack.Stack, session string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(ctx, []string{"memory", "get", "--session", session, "--nats-url", st.NATSURL}, &out); err == nil {
		t.Errorf("the erased session has memory after the restore:\n%s", out.String())
	}
	if err := run(ctx, []string{"export", "--session", session, "--nats-url", st.NATSURL}, &out); err == nil && strings.Contains(out.String(), "QUOKKA-BK") {
		t.Errorf("the erased session's transcript is back:\n%s", out.String())
	}
	sess := eventtest.NewSession("", session)
	body, _ := json.Marshal([]event.Event{sess.User("late", "QUOKKA-BK again")})
	resp, err := http.Post("http://"+st.HTTPAddr+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Errorf("an event of the erased session after the restore: %d, want 410", resp.StatusCode)
	}
}
