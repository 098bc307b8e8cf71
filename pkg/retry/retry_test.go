package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

var fast = retry.Policy{First: time.Millisecond, Max: 4 * time.Millisecond}

// TestDo: a failing attempt is retried until it succeeds; a Permanent error
// ends at once and is returned unmarked.
func TestDo(t *testing.T) {
	ctx := context.Background()
	n := 0
	err := fast.Do(ctx, nil, "flaky", func(context.Context) error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("flaky: err %v after %d attempts", err, n)
	}

	bad := errors.New("incompatible")
	n = 0
	err = fast.Do(ctx, nil, "permanent", func(context.Context) error { n++; return retry.Permanent(bad) })
	if err != bad || n != 1 {
		t.Fatalf("permanent: err %v after %d attempts", err, n)
	}
	if retry.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
}

// TestDoEndsWithContext: the caller's context ends the retry, while it
// waits and when it is cancelled during an attempt; the error is ctx's.
func TestDoEndsWithContext(t *testing.T) {
	slow := retry.Policy{First: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := slow.Do(ctx, nil, "down", func(context.Context) error { return errors.New("down") })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("waiting: err %v after %v", err, time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	n := 0
	err = fast.Do(ctx, nil, "cancelled inside", func(context.Context) error {
		n++
		cancel()
		return errors.New("down")
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("cancelled during an attempt: err %v after %d attempts", err, n)
	}
}

// TestDoBoundsAttempts: each attempt's context ends after Policy.Attempt
// and the next attempt starts.
func TestDoBoundsAttempts(t *testing.T) {
	p := fast
	p.Attempt = 20 * time.Millisecond
	n := 0
	err := p.Do(context.Background(), nil, "hung once", func(actx context.Context) error {
		if n++; n == 1 {
			<-actx.Done() // a request nobody answers
			return actx.Err()
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("hung once: err %v, %d attempts", err, n)
	}
}

// TestBackoff: the waits double from First and are capped at Max; Reset
// starts again; Jitter keeps a wait w within [w/2, 3w/2).
func TestBackoff(t *testing.T) {
	b := retry.Policy{First: 100 * time.Millisecond, Max: time.Second}.Backoff()
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if w := b.Next(); w != 100*time.Millisecond {
		t.Fatalf("after Reset: %v", w)
	}

	j := retry.Policy{First: 8 * time.Millisecond, Max: 64 * time.Millisecond, Jitter: true}.Backoff()
	for i, base := range []time.Duration{8, 16, 32, 64, 64} {
		w, base := j.Next(), base*time.Millisecond
		if w < base/2 || w >= base*3/2 {
			t.Fatalf("wait %d: %v outside [%v, %v)", i, w, base/2, base*3/2)
		}
	}
}

// TestDoLogs: failures are logged, with LogEvery only the first and every
// LogEvery-th.
func TestDoLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p := fast
	p.LogEvery = 10
	n := 0
	_ = p.Do(context.Background(), log, "reading", func(context.Context) error {
		if n++; n <= 12 {
			return errors.New("down")
		}
		return nil
	})
	if c := strings.Count(buf.String(), "reading failed; retrying"); c != 2 {
		t.Fatalf("%d log lines for 12 failures with LogEvery 10, want 2:\n%s", c, buf.String())
	}
}

// TestPause: a whole wait reports true; a closed stop ends it early with
// false.
func TestPause(t *testing.T) {
	if !retry.Pause(nil, time.Millisecond) {
		t.Fatal("a whole wait reported a stop")
	}
	stop := make(chan struct{})
	close(stop)
	start := time.Now()
	if retry.Pause(stop, time.Hour) || time.Since(start) > 10*time.Second {
		t.Fatal("a closed stop did not end the wait")
	}
}

func TestAfterDoublesToMax(t *testing.T) {
	p := retry.Policy{First: 2 * time.Second, Max: 30 * time.Second}
	for n, want := range map[int]time.Duration{0: 2 * time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 4: 16 * time.Second, 5: 30 * time.Second, 50: 30 * time.Second} {
		if got := p.After(n); got != want {
			t.Errorf("After(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestDoAttemptsAndWait: Attempts caps the attempts and returns the last
// error; Wait replaces the backoff's wait; an attempt never gets the whole
// of a short caller's deadline.
func TestDoAttemptsAndWait(t *testing.T) {
	n := 0
	boom := errors.New("boom")
	err := retry.Policy{First: time.Hour, Max: time.Hour, Attempts: 3}.Do(context.Background(), nil, "x", func(context.Context) error {
		n++
		return retry.Wait(boom, time.Millisecond)
	})
	if !errors.Is(err, boom) || n != 3 {
		t.Fatalf("after %d attempts: %v, want boom after 3 (each waiting 1 ms, not the hour of the backoff)", n, err)
	}
	if d := retry.WaitOf(fmt.Errorf("wrapped: %w", retry.Wait(boom, time.Second))); d != time.Second {
		t.Fatalf("WaitOf a wrapped Wait: %v", d)
	}
	if retry.WaitOf(boom) != 0 || retry.Wait(nil, time.Second) != nil {
		t.Fatal("WaitOf an unmarked error, or Wait(nil)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var budgets []time.Duration
	_ = retry.Policy{First: time.Millisecond, Max: time.Millisecond, Attempt: time.Minute, Attempts: 2}.Do(ctx, nil, "x", func(actx context.Context) error {
		dl, _ := actx.Deadline()
		budgets = append(budgets, time.Until(dl))
		return boom
	})
	if len(budgets) != 2 || budgets[0] > 1100*time.Millisecond {
		t.Fatalf("attempt budgets %v within a 2 s deadline: want about 1 s each, not the whole", budgets)
	}
}
