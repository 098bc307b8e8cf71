package testpoll_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	testpoll.Until(t, 5*time.Second, "third call", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("cond called %d times, want 3", n.Load())
	}
}

// fakeTB records Fatalf instead of stopping the goroutine.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
}

func TestUntilFailsAfterDeadline(t *testing.T) {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	calls := 0
	go func() {
		defer close(done)
		testpoll.Until(f, 30*time.Millisecond, "never", func() bool {
			calls++
			return f.failed != "" // Fatalf does not stop a fake: end the loop once it was called
		})
	}()
	<-done
	if f.failed == "" {
		t.Fatal("Until did not fail after its deadline")
	}
	if calls < 2 {
		t.Fatalf("cond called %d times before the deadline, want several", calls)
	}
}
