package stack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"
)

func testStack() (*Stack, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	return &Stack{cancel: cancel, log: slog.New(slog.NewTextHandler(io.Discard, nil)), pause: time.Millisecond, done: make(chan struct{})}, ctx
}

// A service that fails is restarted; the stack keeps running.
func TestStackRestartsAFailedService(t *testing.T) {
	s, ctx := testStack()
	var runs atomic.Int32
	s.goRun(ctx, "flaky", func(ctx context.Context) error {
		if runs.Add(1) <= 2 {
			return errors.New("NATS went away")
		}
		<-ctx.Done()
		return nil
	})
	testpoll.Until(t, 5*time.Second, "a third run of the service", func() bool { return runs.Load() >= 3 })
	if ctx.Err() != nil || s.Err() != nil {
		t.Fatalf("stack stopped: ctx %v, err %v", ctx.Err(), s.Err())
	}
	s.cancel()
	s.wg.Wait()
}

// A service that keeps failing right away stops the stack with its error.
func TestStackGivesUpOnAServiceThatKeepsFailing(t *testing.T) {
	s, ctx := testStack()
	var runs atomic.Int32
	s.goRun(ctx, "broken", func(context.Context) error {
		runs.Add(1)
		return errors.New("bad configuration")
	})
	s.wg.Wait()
	if runs.Load() != maxQuickFailures {
		t.Fatalf("ran %d times, want %d", runs.Load(), maxQuickFailures)
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "broken failed 5 times in a row: bad configuration") {
		t.Fatalf("stack error = %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the stack was not stopped")
	}
}
