package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestCommitFailedAndReplay: recall commit --failed lists parked long-term
// memory commits, --replay-failed re-queues them on RECALL_COMMITS.
func TestCommitFailedAndReplay(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, events.BucketLTMState)
	p := &parked.Commit{Tenant: "acme", User: "u1", Session: "s1", Reason: events.CommitReasonSessionEnded, UpTo: 42,
		Error: "long_term extraction: calling anthropic: 529 overloaded", Attempts: 5, ParkedAt: time.Now()}
	if err := parked.PutCommit(ctx, kv, p); err != nil {
		t.Fatal(err)
	}
	url := s.ClientURL()
	cli := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, append(args, "--nats-url", url), &out); err != nil {
			t.Fatalf("recall %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	if out := cli("commit", "--failed"); !strings.Contains(out, "529 overloaded") || !strings.Contains(out, "u1") || !strings.Contains(out, "42") {
		t.Fatalf("commit --failed:\n%s", out)
	}
	if out := cli("commit", "--replay-failed", "--session", "s1", "--tenant", "other"); !strings.Contains(out, "replayed 0") {
		t.Fatalf("a replay of another tenant's session: %s", out)
	}
	if out := cli("commit", "--replay-failed", "--session", "s1", "--tenant", "acme"); !strings.Contains(out, "replayed 1") {
		t.Fatalf("replay: %s", out)
	}
	st, _ := js.Stream(ctx, events.StreamCommits)
	if info, _ := st.Info(ctx); info.State.Msgs != 1 {
		t.Fatalf("%d commits queued after the replay, want 1", info.State.Msgs)
	}
	if out := cli("commit", "--failed"); !strings.Contains(out, "no parked") {
		t.Fatalf("after the replay: %s", out)
	}
}
