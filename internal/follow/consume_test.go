package follow_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/follow"
	"github.com/recallhq/recall/pkg/retry"
)

// TestConsumeRestarts: a failed open and a consume that stops are both
// started again (a fresh open each time) until ctx ends; Consume returns
// once ctx ends, while consuming or while it waits.
func TestConsumeRestarts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	opens, consumes := 0, 0
	open := func(context.Context) (jetstream.Consumer, error) {
		if opens++; opens == 1 {
			return nil, errors.New("no leader")
		}
		return nil, nil
	}
	consume := func(ctx context.Context, _ jetstream.Consumer) error {
		if consumes++; consumes < 3 {
			return errors.New("the message iterator closed")
		}
		cancel()
		<-ctx.Done()
		return nil
	}
	done := make(chan struct{})
	go func() {
		follow.Consume(ctx, log, "d", retry.Policy{First: time.Millisecond, Max: 2 * time.Millisecond}, open, consume)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not return when ctx ended")
	}
	if opens != 4 || consumes != 3 {
		t.Fatalf("%d opens, %d consumes; want 4 and 3", opens, consumes)
	}

	// Ended while waiting for a restart.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	follow.Consume(ctx, log, "d", retry.Policy{First: time.Hour, Max: time.Hour},
		func(context.Context) (jetstream.Consumer, error) { return nil, errors.New("down") },
		func(context.Context, jetstream.Consumer) error { return nil })
	if time.Since(start) > 10*time.Second {
		t.Fatal("Consume waited past its context")
	}
}
