package erase

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// transcriptReaders is the number of consumers on the transcript stream.
func transcriptReaders(t *testing.T, ctx context.Context, js jetstream.JetStream) int {
	t.Helper()
	s, err := js.Stream(ctx, events.StreamTranscript)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// TestGuardReadsOnlyWhileATombstoneLives: with no tombstone the guard
// reads nothing (no consumer on the transcript); an erase starts it, and
// when the tombstone expires it stops again.
func TestGuardReadsOnlyWhileATombstoneLives(t *testing.T) {
	js, ctx := setup(t)
	seed(t, ctx, js, "s1")
	e := New(js, Config{Drain: time.Millisecond, TombstoneTTL: 2 * time.Second}, nil, nil)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := e.Guard(gctx); err != nil {
		t.Fatal(err)
	}
	// A guard that always reads has its consumer before Guard returns.
	if n := transcriptReaders(t, ctx, js); n != 0 {
		t.Fatalf("%d transcript readers with no tombstone, want 0", n)
	}
	if _, err := e.Session(ctx, "t1", "s1", Actor{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "the guard follows the transcript while the tombstone lives", func() bool {
		return transcriptReaders(t, ctx, js) == 1
	})
	testpoll.Until(t, 15*time.Second, "the guard stops reading once the tombstone expired", func() bool {
		return transcriptReaders(t, ctx, js) == 0
	})
}
