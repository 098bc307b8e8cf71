package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

func TestUnifiedDiff(t *testing.T) {
	a := "# A\n_a_\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n"
	b := "# A\n_a_\none\n2\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n"
	want := `--- x@1
+++ x@2
@@ -1,7 +1,7 @@
 # A
 _a_
 one
-two
+2
 three
 four
 five
@@ -9,3 +9,4 @@
 seven
 eight
 nine
+ten
`
	if got := unifiedDiff(a, b, "x@1", "x@2", 3); got != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", got, want)
	}
	if got := unifiedDiff(a, a, "x", "y", 3); got != "" {
		t.Fatalf("equal texts: %q", got)
	}
	if got := unifiedDiff("", "new\n", "x@0", "x@1", 3); got != "--- x@0\n+++ x@1\n@@ -0,0 +1 @@\n+new\n" {
		t.Fatalf("from empty: %q", got)
	}
}

func TestMemoryGetAndHistory(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, events.BucketMemory)
	for i, notes := range []string{"# T\n_d_\nfirst\n", "# T\n_d_\nsecond\n"} {
		b, _ := json.Marshal(events.MemoryRecord{Notes: notes, CoveredSeq: uint64(10 * (i + 1)), Extractions: i + 1})
		if _, err := kv.Put(ctx, events.MemoryKey("acme", "s1"), b); err != nil {
			t.Fatal(err)
		}
	}
	url := s.ClientURL()
	var out bytes.Buffer
	if err := run(ctx, []string{"memory", "get", "--session", "s1", "--tenant", "acme", "--nats-url", url}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "revision 2") || !strings.Contains(out.String(), "covered seq 20") || !strings.HasSuffix(out.String(), "second\n") {
		t.Fatalf("memory get:\n%s", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"memory", "history", "--session", "s1", "--tenant", "acme", "--nats-url", url}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 revision(s)", "+first", "-first\n+second\n", "--- acme.s1@1\n+++ acme.s1@2"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("memory history lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(ctx, []string{"memory", "get", "--session", "nope", "--tenant", "acme", "--nats-url", url}, &out); err == nil {
		t.Fatal("no error for a session without memory")
	}
}

func TestExtractFailedAndReplay(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, events.BucketParked)
	b, _ := json.Marshal(map[string]any{
		"request": events.ExtractionRequested{Tenant: "acme", Session: "s1", UpToSeq: 42},
		"reason":  "no_valid_tool_call", "error": "model produced no valid tool call", "attempts": 3,
	})
	if _, err := kv.Put(ctx, "acme.s1.42", b); err != nil {
		t.Fatal(err)
	}
	url := s.ClientURL()
	var out bytes.Buffer
	if err := run(ctx, []string{"extract", "--failed", "--nats-url", url}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no_valid_tool_call") || !strings.Contains(out.String(), "42") {
		t.Fatalf("extract --failed:\n%s", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"extract", "--replay-failed", "--session", "s1", "--tenant", "acme", "--nats-url", url}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "replayed 1") {
		t.Fatalf("replay: %s", out.String())
	}
	st, _ := js.Stream(ctx, events.StreamExtract)
	if info, _ := st.Info(ctx); info.State.Msgs != 1 {
		t.Fatalf("%d requests queued after replay, want 1", info.State.Msgs)
	}
	out.Reset()
	if err := run(ctx, []string{"extract", "--failed", "--nats-url", url}, &out); err != nil || !strings.Contains(out.String(), "no parked") {
		t.Fatalf("after replay: %v %s", err, out.String())
	}
}
