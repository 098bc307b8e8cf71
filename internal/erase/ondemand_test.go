package erase

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/testpoll"
)

// transcriptReaders is the number of consumers on each transcript shard
// stream, in shard order.
func transcriptReaders(t *testing.T, ctx context.Context, js jetstream.JetStream) []int {
	t.Helper()
	var out []int
	for _, name := range testLayout.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.CachedInfo().State.Consumers)
	}
	return out
}

// each reports whether every shard has n readers.
func each(readers []int, n int) bool {
	for _, r := range readers {
		if r != n {
			return false
		}
	}
	return len(readers) > 0
}

// TestGuardReadsOnlyWhileATombstoneLives: with no tombstone the guard
// reads nothing (no consumer on any transcript shard); an erase starts it
// (one consumer on every shard), and when the tombstone expires it stops
// again.
func TestGuardReadsOnlyWhileATombstoneLives(t *testing.T) {
	js, ctx := setup(t)
	seed(t, ctx, js, "s1")
	e := New(js, testLayout, Config{Drain: time.Millisecond, TombstoneTTL: 2 * time.Second}, nil, nil)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := e.Guard(gctx); err != nil {
		t.Fatal(err)
	}
	// A guard that always reads has its consumer before Guard returns.
	if n := transcriptReaders(t, ctx, js); !each(n, 0) {
		t.Fatalf("transcript readers per shard with no tombstone: %v, want none", n)
	}
	if _, err := e.Session(ctx, "t1", "s1", Actor{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "the guard follows the transcript while the tombstone lives", func() bool {
		return each(transcriptReaders(t, ctx, js), 1)
	})
	testpoll.Until(t, 15*time.Second, "the guard stops reading once the tombstone expired", func() bool {
		return each(transcriptReaders(t, ctx, js), 0)
	})
}
